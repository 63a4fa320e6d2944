"""The main job (`python -m keras_bert.apps.demo --quick`): from the standard library's
docstrings to a pre-trained tiny BERT, fine-tuned to tell a paragraph's package, exported as a
SavedModel and a TFLite model that answer raw text as the Keras model does; its labels, outputs
and progress lines; README.md's demo table and the fingerprint of the code under it."""

import json
import os
import re
import subprocess
import sys

import pytest

from keras_bert.apps import source_graph
from keras_bert.apps.demo import corpus, readme, summary
from keras_bert.checkpoints import load_init_checkpoint

BAR = re.compile(r"\d+/\d+ \[[=>.]+\]")
ABSL_RECORD = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")


def test_stdlib_corpus_is_documents_of_sentences(tmp_path):
    documents = corpus.stdlib_documents(max_modules=5)
    assert len(documents) == 5
    names = [name for name, _ in documents]
    assert names == sorted(names) and not any(
        n.split(".")[-1].startswith("_") and n.split(".")[-1] != "__init__" for n in names
    )
    assert all(len(text) >= 200 for _, text in documents)
    path = str(tmp_path / "corpus.txt")
    count = corpus.write_corpus(documents, path)
    with open(path, encoding="utf-8") as f:
        blocks = [b for b in f.read().split("\n\n") if b.strip()]
    assert len(blocks) == count >= 3  # One block of sentence lines per module.
    assert all(len(b.splitlines()) >= 2 for b in blocks)


def test_package_labels_come_from_module_names_split_by_module():
    packages = corpus.QUICK_PACKAGES
    documents = corpus.stdlib_documents(packages=packages)
    assert {name.split(".")[0] for name, _ in documents} == set(packages)
    train, dev, dev_modules = corpus.package_examples(documents, packages, train_cap=64, dev_cap=16)
    assert corpus.package_examples(documents, packages, train_cap=64, dev_cap=16) == (
        train,
        dev,
        dev_modules,
    )
    text_of = dict(documents)
    for label, paragraph, module in train + dev:
        assert (
            label == module.split(".")[0] and label in packages
        )  # The label is the module's package.
        assert paragraph in " ".join(
            text_of[module].split()
        )  # A paragraph of that module's docstrings.
    # Whole modules are held out: none gives both training and dev paragraphs, and no text is in
    # both.
    assert {m for _, _, m in dev} <= set(dev_modules) and not {m for _, _, m in train} & set(
        dev_modules
    )
    assert not {p for _, p, _ in train} & {p for _, p, _ in dev}
    for package in packages:  # Every class on both sides, capped.
        assert 0 < sum(label == package for label, *_ in train) <= 64
        assert 0 < sum(label == package for label, *_ in dev) <= 16


def test_package_examples_drop_repeated_paragraphs_from_dev():
    shared = "This paragraph is copied word for word into two modules of the package."
    unique = "A paragraph of {} that says something of its own about the module it documents."
    documents = [(f"pkg.m{i}", f"{unique.format(i)}\n\n{shared}\n\nshort text") for i in range(4)]
    train, dev, dev_modules = corpus.package_examples(documents, ("pkg",))
    assert (
        len(dev_modules) == 1 and len(train) == 4 and len(dev) == 1
    )  # The shared one trains, once.
    assert dev[0][1] == unique.format(dev_modules[0][-1]) and shared not in [p for _, p, _ in dev]
    assert (
        corpus.paragraphs("short text\n\n>>> print('doctest lines are not prose at all, dropped')")
        == []
    )


def test_quick_demo_runs_the_whole_path(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "keras_bert.apps.demo", "--quick", f"--model_dir={tmp_path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    out = run.stdout
    assert run.returncode == 0, out[-5000:]
    lines = out.split("\n")
    # One line per stage, in order; the progress bars hold no log line.
    assert [line[:4] for line in lines if re.match(r"\d/7 ", line)] == [
        f"{k}/7 " for k in range(1, 8)
    ]
    bars = [line for line in lines if BAR.search(line)]
    assert (
        len([b for b in bars if re.search(r"(\d+)/\1 \[=+\]", b.split("\r")[-1])]) == 3
    )  # Three finished bars.
    assert not [b for b in bars if ABSL_RECORD.search(b) or "WARNING" in b or "INFO" in b]

    # The numbers: pre-training held-out accuracies, dev accuracy against the majority class, and
    # the served models' accuracy and agreement with the Keras model over the whole dev set.
    for row in (
        "held-out MLM accuracy",
        "held-out NSP accuracy",
        "package of a paragraph, dev accuracy",
    ):
        assert re.search(rf"{row} +0\.\d{{3}} ", out), row
    keras_accuracy = float(
        re.search(r"dev accuracy +(0\.\d+) +\(majority class: (0\.\d+)", out).group(1)
    )
    served = {
        name: tuple(
            map(
                float,
                re.search(
                    rf"{name} accuracy / agreement with Keras +([\d.]+) / ([\d.]+)", out
                ).groups(),
            )
        )
        for name in ("SavedModel", "TFLite")
    }
    assert served["SavedModel"] == (
        keras_accuracy,
        1.0,
    )  # The same float32 graph: the same answers.
    assert served["TFLite"][1] >= 0.8  # int8 weights may flip a near tie.
    assert abs(served["TFLite"][0] - keras_accuracy) <= 1 - served["TFLite"][1] + 1e-9
    # A few answers printed: true package, SavedModel's and TFLite's, the paragraph.
    header = lines.index(next(line for line in lines if "true package  SavedModel  TFLite" in line))
    answers = [line.split() for line in lines[header + 1 : header + 5]]
    assert all(
        row[0] in corpus.QUICK_PACKAGES and row[1] in corpus.QUICK_PACKAGES for row in answers
    )

    # Where everything was written, and it is there.
    data = tmp_path / "data"
    for path in (
        data / "vocab.txt",
        data / "packages",
        tmp_path / "run",
        tmp_path / "run" / "training_curve.png",
        tmp_path / "finetune" / "model",
        tmp_path / "finetune" / "training_curve.png",
        tmp_path / "serving" / "1",
        tmp_path / "tflite" / "1" / "model.tflite",
    ):
        assert path.exists() and str(path) in out, path
    for path in (
        data / "packages" / "train.tsv",
        data / "packages" / "dev.tsv",
        tmp_path / "run" / "ckpt-40.index",
        tmp_path / "finetune" / "model" / "model.keras",
        tmp_path / "serving" / "1" / "saved_model.pb",
    ):
        assert path.exists(), path
    assert any(name.endswith(".tfrecord") for name in os.listdir(data / "train"))
    # The table's numbers as JSON, which README's demo table is rendered from.
    with open(tmp_path / summary.SUMMARY_FILE, encoding="utf-8") as f:
        numbers = json.load(f)
    assert round(numbers["finetuning"]["accuracy"], 3) == keras_accuracy  # Printed to 3 places.
    assert (  # Printed to 3 places.
        round(numbers["serving"]["TFLite"]["accuracy"], 3),
        round(numbers["serving"]["TFLite"]["agreement_with_keras"], 3),
    ) == served["TFLite"]
    table = readme.readme_table(numbers)
    assert f"{keras_accuracy:.3f}, macro F1" in table and table.count("\n") == 7
    assert os.listdir(tmp_path / "run" / "tensorboard") and os.listdir(
        tmp_path / "finetune" / "tensorboard"
    )
    # The pre-training run directory is an init checkpoint for tasks: encoder, vocabulary and
    # casing.
    init = load_init_checkpoint(tmp_path / "run")
    assert (init.format, init.lower_case, init.encoder.config.num_hidden_layers) == (
        "pretraining_run",
        True,
        1,
    )
    with open(data / "vocab.txt", encoding="utf-8") as f:
        assert init.vocabulary == f.read().splitlines()


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


def deterministic_rows(table):
    return [row for row in table.splitlines() if not row.startswith("| wall time")]


def test_readme_demo_table_is_rendered_from_demo_numbers(tmp_path):
    """README's table is `readme_table`'s rendering (the slow test below reruns the demo itself)."""
    _, table = readme.read_readme(README)
    assert table.startswith("| | `make demo` |") and len(table.splitlines()) == 8
    numbers = {float(x) for x in re.findall(r"\b0\.\d{3}\b", table)}
    assert len(numbers) >= 6


def test_readme_demo_table_was_rendered_from_the_code_under_the_demo():
    """The full demo is too slow for the default run: README.md's demo table carries the fingerprint
    of the code it was rendered from (`make readme-demo`), and any change to that code since fails
    here."""
    stored, _ = readme.read_readme(README)
    current = readme.source_fingerprint(ROOT)
    if stored != current:
        pytest.fail(
            "the code under the demo changed since README.md's table was rendered: run `make "
            f"readme-demo` (README.md says source={stored}, the code is {current})",
            pytrace=False,
        )


def test_code_under_the_demo_is_what_the_demo_runs():
    """The fingerprinted modules: the demo's own, what they import (function-local imports
    included), the packages above them, and the modules loaded by name (the task registry's
    family, the package's lazy names); not the other command lines."""
    modules = source_graph.parse_modules(ROOT)
    under = readme.code_under_the_demo(modules)
    assert {
        "keras_bert.apps.demo.corpus",
        "keras_bert.apps.demo.readme",
        "keras_bert.apps.source_graph",
        "keras_bert.pretraining.runner",
        "keras_bert.tasks.finetuning",
        "keras_bert.tasks.registry",
        "keras_bert.tasks.text_classification.task",  # By name, through the registry.
        "keras_bert.tasks",  # The package above tasks.finetuning.
        "keras_bert.export.tflite",
        "keras_bert.config",
    } <= set(under)
    assert "keras_bert.export.__main__" not in under and "keras_bert.apps" in under


def _fake_repository(root):
    """A repository in miniature: a lazy name, a task registry that imports by f-string, a demo,
    a module nothing imports, setup.cfg's pins."""
    files = {
        "keras_bert/__init__.py": '"""Doc."""\nNAMES = {"Thing": "keras_bert.thing:Thing"}\n',
        "keras_bert/thing.py": (
            '"""Thing."""\n\n\nclass Thing:\n    """A thing."""\n\n    rate = 0.1\n'
        ),
        "keras_bert/unused.py": "Y = 2\n",
        "tasks/__init__.py": "",
        "tasks/registry.py": (
            "import importlib\n\n\ndef get(family):\n"
            '    return importlib.import_module(f"keras_bert.tasks.{family}.task")\n'
        ),
        "tasks/fam/__init__.py": "",
        "tasks/fam/task.py": "EPOCHS = 3\n",
        "apps/__init__.py": "",
        "apps/demo/__init__.py": "",
        "apps/demo/__main__.py": (
            "import keras_bert\nfrom keras_bert.tasks import registry\n\n\ndef run():\n"
            '    return registry.get("fam"), keras_bert.Thing\n'
        ),
        "setup.cfg": "[options]\ninstall_requires =\n    keras==3.15.*\n    numpy>=1.26\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize(
    "path, old, new, moves",
    [
        # Comments, docstrings and formatting: the same code.
        (
            "keras_bert/thing.py",
            "    rate = 0.1\n",
            "    # The rate.\n    rate = (0.1)  # !\n",
            False,
        ),
        (
            "keras_bert/thing.py",
            '"""A thing."""',
            '"""Another thing,\n    told otherwise."""',
            False,
        ),
        ("keras_bert/thing.py", "\n\n\nclass", "\nclass", False),
        ("setup.cfg", "    numpy>=1.26\n", "    numpy>=1.26\n# a comment\n", False),
        ("keras_bert/unused.py", "Y = 2", "Y = 3", False),  # Nothing under the demo imports it.
        # Code: a lazy name's module, a module loaded by f-string, a pin.
        ("keras_bert/thing.py", "rate = 0.1", "rate = 0.2", True),
        ("tasks/fam/task.py", "EPOCHS = 3", "EPOCHS = 4", True),
        ("tasks/registry.py", "def get(family):", "def get(family, x=1):", True),
        ("setup.cfg", "keras==3.15.*", "keras==3.16.*", True),
    ],
)
def test_source_fingerprint_moves_with_code_only(tmp_path, path, old, new, moves):
    _fake_repository(tmp_path)
    before = readme.source_fingerprint(tmp_path)
    text = (tmp_path / path).read_text()
    assert old in text
    (tmp_path / path).write_text(text.replace(old, new))
    assert (readme.source_fingerprint(tmp_path) != before) == moves


def test_update_readme_writes_the_table_and_the_fingerprint(tmp_path):
    _fake_repository(tmp_path)
    (tmp_path / "README.md").write_text(
        "# Title\n\n<!-- demo-table:begin -->\nold table\n<!-- demo-table:end -->\n\nMore.\n"
    )
    numbers = {
        "pretraining": {
            "mlm_accuracy": 0.1364,
            "mlm_most_frequent_token": 0.05,
            "nsp_accuracy": 0.6,
            "nsp_majority": 0.5,
        },
        "finetuning": {
            "accuracy": 0.515,
            "macro_f1": 0.5,
            "majority_accuracy": 0.127,
            "best_epoch": 5,
            "train_paragraphs": 1044,
            "dev_paragraphs": 237,
            "classes": 8,
        },
        "serving": {
            name: {"accuracy": 0.515, "agreement_with_keras": 1.0}
            for name in ("SavedModel", "TFLite")
        },
        "settings": {"epochs": 6},
        "seconds": {"total": 200.0, "Pre-training a tiny BERT": 150.0},
    }
    readme.update_readme(str(tmp_path / "README.md"), numbers)
    text = (tmp_path / "README.md").read_text()
    fingerprint = readme.source_fingerprint(tmp_path)
    assert text.startswith(f"# Title\n\n<!-- demo-table:begin source={fingerprint} -->\n| |")
    assert text.endswith("|\n<!-- demo-table:end -->\n\nMore.\n") and "old table" not in text
    assert readme.read_readme(tmp_path / "README.md") == (fingerprint, readme.readme_table(numbers))
    assert "| 0.136 (most frequent token: 0.050) |" in text and "best epoch 5 of 6" in text
    readme.update_readme(str(tmp_path / "README.md"), numbers)  # Again: the same text.
    assert (tmp_path / "README.md").read_text() == text


@pytest.mark.slow
def test_readme_demo_table_equals_a_fresh_make_demo(tmp_path):
    """`make demo`'s job, run afresh: README's demo table (all rows but the wall time) is what it
    prints. When this fails after a change that moves the numbers, run `make readme-demo` and commit
    README.md."""
    run = subprocess.run(
        [sys.executable, "-m", "keras_bert.apps.demo", f"--model_dir={tmp_path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-5000:]
    with open(tmp_path / summary.SUMMARY_FILE, encoding="utf-8") as f:
        rendered = readme.readme_table(json.load(f))
    assert deterministic_rows(readme.read_readme(README)[1]) == deterministic_rows(rendered), (
        "README.md's demo table differs from this run's numbers: run `make readme-demo`"
    )
