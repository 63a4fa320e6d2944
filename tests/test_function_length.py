"""Functions and modules stay short (STYLE: functions do one thing, one concept per module): no
function in the library, tasks/, export/ or apps/ is 80 lines or longer, docstring included, and no
module is over 600 lines."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ("keras_bert", "tasks", "export", "apps")
LIMIT = 80
MODULE_LIMIT = 600


def function_lengths():
    """(lines, "path:name") of every function and method of the sources (nested ones count in
    the function around them, and again on their own)."""
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.end_lineno - node.lineno + 1, f"{path.relative_to(ROOT)}:{node.name}"


def test_every_function_is_under_80_lines():
    lengths = sorted(function_lengths(), reverse=True)
    assert lengths, "no functions found"
    too_long = [f"{name} ({lines} lines)" for lines, name in lengths if lines >= LIMIT]
    assert not too_long, f"functions of {LIMIT} lines or more: {', '.join(too_long)}"


def module_lengths():
    """(lines, "path") of every module of the sources."""
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            yield len(path.read_text().splitlines()), path.relative_to(ROOT).as_posix()


def test_every_module_is_at_most_600_lines():
    lengths = sorted(module_lengths(), reverse=True)
    assert lengths, "no modules found"
    too_long = [f"{name} ({lines} lines)" for lines, name in lengths if lines > MODULE_LIMIT]
    assert not too_long, f"modules over {MODULE_LIMIT} lines: {', '.join(too_long)}"
