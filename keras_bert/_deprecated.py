"""Old module names kept for one release after a rename: the old module warns and becomes the new.

A renamed module's old file holds only

    sys.modules[__name__] = _deprecated.moved_module(__name__, "keras_bert.new.name")

so that `import old.name` (or `from old import name`) warns once, with a DeprecationWarning
pointing at the importing line, and gives the new module itself: the same objects, private names
and monkeypatching included.
"""

import importlib
import warnings


def moved_module(old, new):
    """Warn that module `old` is now `new` and return the module `new`.

    Args:
        old: str, the deprecated module's name (its `__name__`).
        new: str, the module it was renamed to.

    Returns:
        The module `new`.
    """
    # stacklevel 3: past this function and the old module's body to its importer (warnings skips
    # importlib's own frames).
    warnings.warn(
        f"{old} is deprecated: it is now {new} (the old name goes in the next release).",
        DeprecationWarning,
        stacklevel=3,
    )
    return importlib.import_module(new)
