"""Runs the code blocks of a documentation guide, in order, at a tiny size.

A guide is a Markdown page under docs/guides/. Its fenced blocks of `python` and `sh` (or `bash`)
run in one fresh Python process, in a working directory of their own: Python blocks share one
namespace (as a notebook's cells), shell blocks run with bash (`-e -o pipefail`) and find the
console scripts (`keras-bert-*`) on the PATH. Blocks of other languages (`text`, `json`, ...) are
output or file contents and do not run. Directives are HTML comments, invisible on the site:

- `<!-- guide: slow -->` anywhere: the page runs under `pytest -m slow` only.
- `<!-- guide: fixtures NAME ... -->` anywhere: files the page expects to find, written before it
  runs (`guide_fixtures.FIXTURES`: tiny stand-ins with the real names, e.g. a 1-layer checkpoint
  in `uncased_L-12_H-768_A-12/`).
- `<!-- skip: REASON -->` right before a block: the block does not run (network, real data,
  hours, or an API that does not exist yet); the reason is required and skips are counted.
- `<!-- tiny: OLD => NEW; ... -->` right before a block: literal replacements made before it runs
  (sizes: steps, epochs, sequence lengths); `<!-- tiny: + --flag=value ... -->` appends the flags
  to every `keras-bert-*` command of the block.
"""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

RUN = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
FENCE = re.compile(r"^```(\w*)[^\n]*$")
DIRECTIVE = re.compile(r"^<!--\s*(skip|tiny|guide):\s*(.*?)\s*-->$")
COMMAND = re.compile(r"^\s*(keras-bert-[\w-]+|python3? -m keras_bert[\w.]*)\b")


@dataclasses.dataclass
class Block:
    """One fenced block: its language (`python`, `sh` or another), code and first line."""

    language: str
    code: str
    line: int
    skip: str | None = None
    tiny: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Guide:
    """A parsed guide: its blocks and page directives."""

    path: Path
    blocks: list[Block]
    slow: bool
    fixtures: list[str]

    @property
    def runnable(self):
        return [b for b in self.blocks if b.language in ("python", "sh") and b.skip is None]

    @property
    def skipped(self):
        return [b for b in self.blocks if b.language in ("python", "sh") and b.skip is not None]


def parse(path):
    """The blocks and directives of the Markdown file at `path`.

    Raises:
        ValueError: an unclosed fence, a `skip` without a reason, or a directive that names no
            block (not followed by one).
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    blocks, pending, slow, fixtures = [], [], False, []
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = DIRECTIVE.match(line.strip())
        fence = FENCE.match(line)
        if directive:
            kind, value = directive.groups()
            if kind == "guide":
                words = value.split()
                slow = slow or words[:1] == ["slow"]
                fixtures += words[1:] if words[:1] == ["fixtures"] else []
            else:
                if kind == "skip" and not value:
                    raise ValueError(f"{path}:{i + 1}: a skip needs a reason")
                pending.append((kind, value, i + 1))
        elif fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
            if end is None:
                raise ValueError(f"{path}:{i + 1}: unclosed code fence")
            block = Block(
                RUN.get(fence.group(1), fence.group(1)), "\n".join(lines[i + 1 : end]), i + 2
            )
            for kind, value, _ in pending:
                if kind == "skip":
                    block.skip = value
                else:
                    block.tiny.append(value)
            blocks.append(block)
            pending, i = [], end
        elif line.strip() and pending:
            raise ValueError(f"{path}:{pending[0][2]}: a directive must come right before a block")
        i += 1
    if pending:
        raise ValueError(f"{path}:{pending[0][2]}: a directive must come right before a block")
    return Guide(Path(path), blocks, slow, fixtures)


def shrink(code, rules):
    """`code` with the block's `tiny` rules applied (replacements, then appended flags)."""
    for rule in rules:
        if rule.startswith("+"):
            code = _append_flags(code, rule[1:].strip())
            continue
        for pair in rule.split(";"):
            old, sep, new = pair.partition("=>")
            if not sep or old.strip() not in code:
                raise ValueError(f"tiny rule {pair.strip()!r}: {old.strip()!r} is not in the block")
            code = code.replace(old.strip(), new.strip())
    return code


def _append_flags(code, extra):
    joined = code.replace("\\\n", " ")
    lines = [f"{line} {extra}" if COMMAND.match(line) else line for line in joined.splitlines()]
    return "\n".join(lines)


def driver(guide, root):
    """The Python source that runs the guide's blocks in order (see the module)."""
    parts = [
        "import subprocess, sys",
        "def _sh(code, where):",
        "    print(f'--- {where}', flush=True)",
        "    status = subprocess.run(['bash', '-e', '-o', 'pipefail', '-c', code]).returncode",
        "    if status:",
        "        sys.exit(f'{where}: exit status {status}')",
    ]
    for block in guide.runnable:
        where = f"{guide.path.relative_to(root)}:{block.line}"
        code = shrink(block.code, block.tiny)
        if block.language == "sh":
            parts.append(f"_sh({code!r}, {where!r})")
        else:
            parts.append(f"print({'--- ' + where!r}, flush=True)")
            parts.append(f"exec(compile({code!r}, {where!r}, 'exec'))")
    return "\n".join(parts) + "\n"


def run(guide, root, workdir, timeout):
    """Runs the guide in `workdir`; returns (exit status, output)."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    script = Path(workdir) / "_guide.py"
    script.write_text(driver(guide, root), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    return result.returncode, result.stdout
