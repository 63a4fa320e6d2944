"""Lazy public names of a package (PEP 562): the package imports in milliseconds and a name's
module (TensorFlow, Keras, ...) loads on its first use.

    __getattr__, __dir__ = attach(__name__, {"BertConfig": "keras_bert.config:BertConfig",
                                             "checkpoints": "keras_bert.checkpoints"})
"""

import importlib
import sys


def attach(package, names):
    """`__getattr__` and `__dir__` for the module named `package`.

    Args:
        package: str, the module's `__name__`.
        names: dict, public name -> "module:attribute", or "module" for a submodule.

    Returns:
        (__getattr__, __dir__): functions to assign at the module's top level.
    """

    def __getattr__(name):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = names[name].partition(":")
        value = importlib.import_module(module_name)
        if attribute:
            value = getattr(value, attribute)
        setattr(sys.modules[package], name, value)  # Later look-ups skip __getattr__.
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
