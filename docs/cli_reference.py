"""The command-line reference page, generated from the absl flags the console scripts define.

    python docs/cli_reference.py > cli.md

Each console script of setup.cfg (`keras-bert-*`) is a module whose `console_main` hands its
docstring and its `define_flags` function to `keras_bert.cli.run_command`. Here that call is
intercepted: the flags are defined (as `--help` would), and each flag's name, type, default and
help are read back from absl, so the page cannot drift from the code. docs/hooks.py adds the page
to the site as reference/cli.md.
"""

import configparser
import importlib
import sys
from pathlib import Path
from unittest import mock

from absl import flags

from keras_bert import cli

ROOT = Path(__file__).resolve().parent.parent


class _Intercepted(Exception):
    """Raised instead of running a command line: its definition has been read."""


def console_scripts(setup_cfg=ROOT / "setup.cfg"):
    """[(script name, "module:function")] of setup.cfg's console_scripts, in its order."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    lines = parser["options.entry_points"]["console_scripts"].strip().splitlines()
    return [tuple(part.strip() for part in line.split("=", 1)) for line in lines]


def command_definition(target):
    """(docstring, [absl Flag], required flag names) of one console script, or None for a script
    that does not go through `keras_bert.cli.run_command` (it has no absl flags to list)."""
    module_name, function_name = target.split(":")
    module = importlib.import_module(module_name)
    seen = {}

    def record(doc, define_flags, required, main):
        seen.update(doc=doc, define_flags=define_flags, required=required)
        raise _Intercepted

    with mock.patch.object(cli, "run_command", record):
        try:
            getattr(module, function_name)()
        except _Intercepted:
            pass
    if not seen:
        return None
    del cli._DEFINED[:]
    seen["define_flags"]()
    defined = [flags.FLAGS[name] for name in dict.fromkeys(cli._DEFINED)]
    return seen["doc"], defined, list(seen["required"])


def _cell(text):
    """Text for a Markdown table cell: one line, no unescaped pipes."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(flag):
    if flag.default is None:
        return ""
    if isinstance(flag.default, bool):
        return "true" if flag.default else "false"
    value = flag.default_as_str if hasattr(flag, "default_as_str") else repr(flag.default)
    return f"`{_cell(value).strip(chr(39))}`" if value not in ("''", '""') else '`""`'


def command_page_section(script, target):
    """Markdown for one console script: what it does (its docstring) and a table of its flags."""
    definition = command_definition(target)
    module_name = target.split(":")[0]
    lines = [
        f"## `{script}`",
        "",
        f"`python -m {module_name.removesuffix('.__main__')}` runs the same.",
        "",
    ]
    if definition is None:
        module = importlib.import_module(module_name)
        lines += [f"```text\n{(module.__doc__ or '').strip()}\n```", ""]
        return "\n".join(lines)
    doc, defined, required = definition
    lines += [f"```text\n{doc.strip()}\n```", ""]
    lines += ["| flag | type | default | help |", "|---|---|---|---|"]
    for flag in sorted(defined, key=lambda f: (f.name not in required, f.name)):
        name = f"`--{flag.name}`" + (" (required)" if flag.name in required else "")
        kind = flag.flag_type()
        lines.append(f"| {name} | {kind} | {_default(flag)} | {_cell(flag.help)} |")
    return "\n".join(lines + [""])


def render():
    """The whole page (Markdown)."""
    scripts = console_scripts()
    parts = [
        "# Command-line reference",
        "",
        "Generated from the absl flags of each console script when the site is built "
        "(`docs/cli_reference.py`); `<command> --help` prints the same. Boolean flags also take "
        "the `--no<flag>` form. Mistakes are answered in one line, `<command>: error: <what is "
        "wrong>`, exit status 2 (see [Errors and what to do](../guides/errors.md)).",
        "",
        *[f"- [`{script}`](#{script})" for script, _ in scripts],
        "",
    ]
    for script, target in scripts:
        parts.append(command_page_section(script, target))
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(render())
