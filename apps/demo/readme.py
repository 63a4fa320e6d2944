"""README.md's demo table: rendered from `demo_summary.json` (`make readme-demo`), with a
fingerprint of the code under the demo in its begin marker:

    <!-- demo-table:begin source=<fingerprint> -->

The full demo takes minutes, too long for the default test run; tests/test_demo.py recomputes the
fingerprint instead and fails when the code changed since the table was rendered.

The fingerprint hashes, in module order, the source of every module the demo can run: the demo's
own modules and the static closure of their imports (function-local ones included) and of the
modules they load by name (`keras_bert.apps.source_graph`), over keras_bert/, tasks/, export/ and
apps/, each as its syntax tree without docstrings (comments, docstrings and formatting do not
count; any other change does); and setup.cfg's `install_requires` lines (the pinned versions).
"""

import ast
import configparser
import hashlib
import os
import re

from keras_bert.apps import source_graph

DEMO = "keras_bert.apps.demo"
README_BEGIN, README_END = "<!-- demo-table:begin", "<!-- demo-table:end -->"
_BEGIN_LINE = re.compile(r"<!-- demo-table:begin(?: source=(\w+))? -->\n")


def readme_table(numbers):
    """README.md's demo table (Markdown) from `demo_summary.json`'s numbers. Every row but the last
    (wall time) is deterministic: a rerun of the demo must render it identically."""
    pre, fine, serving = numbers["pretraining"], numbers["finetuning"], numbers["serving"]
    seconds = numbers["seconds"]

    def stage(word):
        return next((round(v) for k, v in seconds.items() if k.lower().startswith(word)), 0)

    rows = [
        (
            "held-out masked-LM accuracy",
            f"{pre['mlm_accuracy']:.3f} (most frequent token: "
            f"{pre['mlm_most_frequent_token']:.3f})",
        ),
        (
            "held-out next-sentence accuracy",
            f"{pre['nsp_accuracy']:.3f} (majority label: {pre['nsp_majority']:.3f})",
        ),
        (
            f"package of a paragraph, dev accuracy ({fine['train_paragraphs']:,} train / "
            f"{fine['dev_paragraphs']:,} dev paragraphs, {fine['classes']} classes)",
            f"{fine['accuracy']:.3f}, macro F1 {fine['macro_f1']:.3f} (majority class "
            f"{fine['majority_accuracy']:.3f}; best epoch {fine['best_epoch']} of "
            f"{numbers['settings']['epochs']})",
        ),
        *[
            (
                f"{name}: accuracy / same answers as the Keras model",
                f"{serving[name]['accuracy']:.3f} / {serving[name]['agreement_with_keras']:.1%}",
            )
            for name in ("SavedModel", "TFLite")
        ],
        (
            "wall time (varies with the machine)",
            f"{seconds['total']:.0f} s (pre-training {stage('pre-training')}, fine-tuning "
            f"{stage('fine-tuning')}, export {stage('exporting')}, answers {stage('answering')})",
        ),
    ]
    return "\n".join(["| | `make demo` |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows]])


def _without_docstrings(tree):
    """`tree` (changed in place) without the docstrings of its module, classes and functions."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def pinned_dependencies(root):
    """setup.cfg's `install_requires` lines (what the demo runs on), stripped, comments left out."""
    config = configparser.ConfigParser()
    config.read(os.path.join(root, "setup.cfg"), encoding="utf-8")
    lines = config["options"]["install_requires"].splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def code_under_the_demo(modules):
    """The modules the demo can run, sorted: its own, what they import and what they load by name
    (`source_graph.closure`), of `modules` (`source_graph.parse_modules`' result)."""
    starts = [m for m in modules if m == DEMO or m.startswith(DEMO + ".")]
    return sorted(source_graph.closure(starts, modules, by_name=True))


def source_fingerprint(root):
    """The fingerprint of the code under the demo in the repository at `root` (16 hex digits).

    `ast.unparse` of each module's tree without docstrings: one text whatever the comments, the
    docstrings and the formatting (and the same on any Python whose syntax trees agree).
    """
    modules = source_graph.parse_modules(root)
    digest = hashlib.sha256()
    for module in code_under_the_demo(modules):
        code = ast.unparse(_without_docstrings(modules[module][1]))
        digest.update(f"# {module}\n{code}\n".encode())
    digest.update("\n".join(pinned_dependencies(root)).encode())
    return digest.hexdigest()[:16]


def _read(readme_path):
    """(README.md's text, the match of its begin marker's line)."""
    with open(readme_path, encoding="utf-8") as f:
        text = f.read()
    begin = _BEGIN_LINE.search(text)
    if begin is None or README_END not in text[begin.end() :]:
        raise ValueError(f"{readme_path} has no demo table: {README_BEGIN} ... {README_END}.")
    return text, begin


def read_readme(readme_path):
    """(fingerprint or None, table) of README.md's demo table."""
    text, begin = _read(readme_path)
    return begin.group(1), text[begin.end() : text.index(README_END)].strip()


def update_readme(readme_path, numbers):
    """Replaces README.md's demo table with `readme_table(numbers)` and the fingerprint in its
    begin marker with that of the code in README.md's folder."""
    text, begin = _read(readme_path)
    fingerprint = source_fingerprint(os.path.dirname(os.path.abspath(readme_path)))
    text = (
        text[: begin.start()]
        + f"{README_BEGIN} source={fingerprint} -->\n"
        + readme_table(numbers)
        + "\n"
        + text[text.index(README_END) :]
    )
    with open(readme_path, "w", encoding="utf-8") as f:
        f.write(text)
