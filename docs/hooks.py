"""MkDocs hooks (mkdocs.yml `hooks:`): what the site generates when it is built.

- at import (before mkdocstrings reads its paths): links keras_bert/, tasks/ and export/ into
  build/docs-src/keras_bert, the package as installed (setup.cfg's package_dir), for mkdocstrings
  to read (reference/api.md).
- `on_files`: adds the pages generated from the code and the data: reference/cli.md from the absl
  flags (docs/cli_reference.py) and results/*.md with their plots from docs/results/data/*.json
  (docs/render_results.py).
"""

import os
import sys
from pathlib import Path

from mkdocs.structure.files import File

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS))

import cli_reference  # noqa: E402
import render_results  # noqa: E402


def link_package_tree(target=ROOT / "build" / "docs-src" / "keras_bert"):
    """build/docs-src/keras_bert: links to keras_bert's entries plus tasks/, export/ and apps/."""
    if target.parent.exists():
        for link in target.rglob("*") if target.exists() else []:
            if link.is_symlink():
                link.unlink()
    target.mkdir(parents=True, exist_ok=True)
    for entry in (ROOT / "keras_bert").iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, target / entry.name)
    os.symlink(ROOT / "tasks", target / "tasks")
    os.symlink(ROOT / "export", target / "export")
    os.symlink(ROOT / "apps", target / "apps")


# At import, when mkdocs loads the hooks with the configuration: before mkdocstrings' own
# on_config reads its `paths` (a path that does not exist yet would be dropped from the search).
link_package_tree()


def on_files(files, config, **kwargs):
    files.append(File.generated(config, "reference/cli.md", content=cli_reference.render()))
    for name, content in render_results.render_all().items():
        files.append(File.generated(config, f"results/{name}", content=content))
    return files
