"""The package's modules as parsed source, and the imports between them, read without importing
anything: what tests/test_layering.py checks the layers with and what the demo's README table is
fingerprinted over (`keras_bert.apps.demo.readme`).

An import is any `import` or `from ... import` statement of a module's file, function-local ones
included, that names a module of the package; `from package import name` counts as an import of
the module `package.name` when there is one, else of `package`. Modules can also load others by
name (`importlib.import_module`): the package's lazy names, the task registry's families, export's
table of formats. `named_modules` finds those from the strings that name them.
"""

import ast
import os
import re

# A string that names a module of the package, or an attribute of one ("module:attribute").
_MODULE_NAME = re.compile(r"keras_bert(\.\w+)+(:\w+)?")

# Folder of the repository -> the package it installs as (setup.cfg's package_dir).
SOURCES = {
    "keras_bert": "keras_bert",
    "tasks": "keras_bert.tasks",
    "export": "keras_bert.export",
    "apps": "keras_bert.apps",
}


def parse_modules(root, sources=None):
    """Every module of the sources under `root`, parsed.

    Args:
        root: str, the repository's folder.
        sources: dict or None, folder (relative to `root`) -> package name; None: `SOURCES`.

    Returns:
        dict, module name -> (file path, `ast.Module`).
    """
    modules = {}
    for top, package in (SOURCES if sources is None else sources).items():
        for directory, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, os.path.join(root, top))[:-3].replace(os.sep, ".")
                module = (
                    package
                    if relative == "__init__"
                    else f"{package}.{relative.removesuffix('.__init__')}"
                )
                with open(path, encoding="utf-8") as f:
                    modules[module] = (path, ast.parse(f.read(), path))
    return modules


def resolve(name, modules):
    """The module (or its package) of a dotted import name, or None outside the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports(module, modules):
    """The modules of `modules` that `module` imports anywhere in its file."""
    path, tree = modules[module]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(
                resolve(a.name, modules) for a in node.names if a.name.startswith("keras_bert")
            )
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module if path.endswith("__init__.py") else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                name = base + (f".{node.module}" if node.module else "")
            else:
                name = node.module or ""
            if name.startswith("keras_bert"):
                for alias in node.names:
                    full = f"{name}.{alias.name}"
                    found.add(full if full in modules else resolve(name, modules))
    found.discard(None)
    found.discard(module)
    return found


def module_level_imports(module, modules):
    """The modules of `modules` imported at the top level of `module` (outside functions)."""
    _, tree = modules[module]
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keras_bert"):
            found.update(resolve(f"{node.module}.{a.name}", modules) for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(resolve(a.name, modules) for a in node.names)
    return found


def named_modules(module, modules):
    """The modules of `modules` that strings of `module` name: a string constant that is a module
    name ("keras_bert.models.encoder", "keras_bert.config:BertConfig"), and every module that an
    f-string starting with "keras_bert." can form (f"keras_bert.tasks.{family}.task": each task
    family's `task` module)."""
    found = set()
    for node in ast.walk(modules[module][1]):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _MODULE_NAME.fullmatch(node.value):
                found.add(resolve(node.value.partition(":")[0], modules))
        elif isinstance(node, ast.JoinedStr):
            pattern = "".join(
                re.escape(part.value) if isinstance(part, ast.Constant) else r"[\w.]+"
                for part in node.values
            )
            if pattern.startswith("keras_bert"):
                found.update(m for m in modules if re.fullmatch(pattern, m))
    found.discard(None)
    found.discard(module)
    return found


def closure(starts, modules, by_name=False):
    """The modules that importing `starts` can run: those, what they import (transitively), and
    the packages above each (an import runs every `__init__` on the way down).

    Args:
        starts: iterable of module names.
        modules: dict, `parse_modules`' result.
        by_name: bool, follow `named_modules` too (what the modules may load by name).

    Returns:
        set of module names.
    """
    seen, todo = set(), list(starts)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(imports(module, modules))
        if by_name:
            todo.extend(named_modules(module, modules))
        parent = module.rpartition(".")[0]
        if parent in modules:
            todo.append(parent)
    return seen
