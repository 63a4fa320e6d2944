"""Shared pieces of the absl command lines."""

from absl import flags


def define(define_fn, name, *args, **kwargs):
    """Defines an absl flag with `define_fn` (e.g. `flags.DEFINE_integer`), replacing a flag
    of the same name that another command line defined in this process.

    Each command line module defines its own flags; when several run in one process
    (tests do), the last one defined wins instead of raising DuplicateFlagError.
    """
    if name in flags.FLAGS:
        delattr(flags.FLAGS, name)
    return define_fn(name, *args, **kwargs)
