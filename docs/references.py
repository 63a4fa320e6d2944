"""Fails the documentation build on broken `keras_bert.*` references in docstrings.

    python docs/references.py

Every module of the installed `keras_bert` package (with `keras_bert.tasks`, `keras_bert.export`
and `keras_bert.apps`) is imported. A reference is a dotted name in backticks that starts with
`keras_bert.` (e.g. `keras_bert.checkpoints.load_encoder`); each one in any docstring must name a
module or an attribute that exists, else the check fails and lists them (object, reference).
`make docs` runs it from docs/hooks.py before mkdocs renders the API reference
(docs/reference/api.md, mkdocstrings).
"""

import importlib
import inspect
import pkgutil
import re
import sys

REFERENCE = re.compile(r"`(keras_bert(?:\.\w+)+)(?:\(\))?`")


# keras_bert.tasks, keras_bert.export and keras_bert.apps live in tasks/, export/ and apps/ of the
# repository (setup.cfg's package_dir): an editable install does not list them under keras_bert's
# own folder.
ROOTS = ("keras_bert", "keras_bert.tasks", "keras_bert.export", "keras_bert.apps")


def modules(roots=ROOTS):
    """Names of the packages and every module below them (private ones excepted)."""
    names = set()
    for package in roots:
        root = importlib.import_module(package)
        names.add(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
            if not any(part.startswith("_") for part in info.name.split(".")[1:]):
                names.add(info.name)
    return sorted(names)


def resolves(name):
    """True if `name` is a module, or an attribute path below the longest importable module."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                value = getattr(value, attribute)
        except AttributeError:
            return False
        return True
    return False


def docstrings(module):
    """(object name, docstring) of a module, its classes, functions and methods defined there."""
    yield module.__name__, inspect.getdoc(module) or ""
    for name, value in list(vars(module).items()):
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value) or inspect.isfunction(value):
            yield f"{module.__name__}.{name}", inspect.getdoc(value) or ""
        if inspect.isclass(value):
            for member, attribute in list(vars(value).items()):
                function = getattr(attribute, "__func__", attribute)
                if inspect.isfunction(function) or isinstance(attribute, property):
                    doc = inspect.getdoc(
                        attribute.fget if isinstance(attribute, property) else function
                    )
                    yield f"{module.__name__}.{name}.{member}", doc or ""


def broken_references(names):
    """[(object, reference)] for references that do not resolve."""
    broken = []
    for module_name in names:
        module = importlib.import_module(module_name)
        for owner, doc in docstrings(module):
            for reference in REFERENCE.findall(doc):
                if not resolves(reference):
                    broken.append((owner, reference))
    return broken


def main():
    """Prints the broken references; 1 if there are any, else 0."""
    names = modules()
    broken = broken_references(names)
    for owner, reference in broken:
        print(f"broken reference in {owner}: `{reference}`", file=sys.stderr)
    if broken:
        print(f"docs: {len(broken)} broken reference(s)", file=sys.stderr)
        return 1
    print(f"docs: every `keras_bert.*` reference of {len(names)} modules resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
