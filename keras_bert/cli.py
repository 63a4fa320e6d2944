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


def use_module_help(doc):
    """Shows `doc` (the command line module's docstring: what it does, with an example) on
    --help also when it runs as a console script, whose __main__ has no docstring of its own."""
    import sys

    main = sys.modules.get("__main__")
    if main is not None and not main.__doc__:
        main.__doc__ = doc


def run_command(doc, define_flags, required, main):
    """Runs a command line: its help text `doc` (see `use_module_help`), its flags, the flags it
    requires (marked here only: validators stay on the global flags, where other command lines
    run in the same process, as in tests, would trip over them) and `main` under absl."""
    from absl import app

    use_module_help(doc)
    define_flags()
    flags.mark_flags_as_required(required)
    app.run(main)
