"""The main job (`python -m keras_bert.demo --quick`): from the standard library's docstrings to a
pre-trained tiny BERT, fine-tuned to tell a paragraph's package, exported as a SavedModel and a
TFLite model that answer raw text as the Keras model does; its labels, outputs and progress
lines."""

import json
import os
import re
import subprocess
import sys

import pytest

from keras_bert import demo
from keras_bert.checkpoints import load_init_checkpoint

BAR = re.compile(r"\d+/\d+ \[[=>.]+\]")
ABSL_RECORD = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")


def test_stdlib_corpus_is_documents_of_sentences(tmp_path):
    documents = demo.stdlib_documents(max_modules=5)
    assert len(documents) == 5
    names = [name for name, _ in documents]
    assert names == sorted(names) and not any(
        n.split(".")[-1].startswith("_") and n.split(".")[-1] != "__init__" for n in names
    )
    assert all(len(text) >= 200 for _, text in documents)
    path = str(tmp_path / "corpus.txt")
    count = demo.write_corpus(documents, path)
    with open(path, encoding="utf-8") as f:
        blocks = [b for b in f.read().split("\n\n") if b.strip()]
    assert len(blocks) == count >= 3  # One block of sentence lines per module.
    assert all(len(b.splitlines()) >= 2 for b in blocks)


def test_package_labels_come_from_module_names_split_by_module():
    packages = demo.QUICK_PACKAGES
    documents = demo.stdlib_documents(packages=packages)
    assert {name.split(".")[0] for name, _ in documents} == set(packages)
    train, dev, dev_modules = demo.package_examples(documents, packages, train_cap=64, dev_cap=16)
    assert demo.package_examples(documents, packages, train_cap=64, dev_cap=16) == (
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
    train, dev, dev_modules = demo.package_examples(documents, ("pkg",))
    assert (
        len(dev_modules) == 1 and len(train) == 4 and len(dev) == 1
    )  # The shared one trains, once.
    assert dev[0][1] == unique.format(dev_modules[0][-1]) and shared not in [p for _, p, _ in dev]
    assert (
        demo.paragraphs("short text\n\n>>> print('doctest lines are not prose at all, dropped')")
        == []
    )


def test_quick_demo_runs_the_whole_path(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "keras_bert.demo", "--quick", f"--model_dir={tmp_path}"],
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
    assert all(row[0] in demo.QUICK_PACKAGES and row[1] in demo.QUICK_PACKAGES for row in answers)

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
    with open(tmp_path / demo.SUMMARY_FILE, encoding="utf-8") as f:
        numbers = json.load(f)
    assert round(numbers["finetuning"]["accuracy"], 3) == keras_accuracy  # Printed to 3 places.
    assert (  # Printed to 3 places.
        round(numbers["serving"]["TFLite"]["accuracy"], 3),
        round(numbers["serving"]["TFLite"]["agreement_with_keras"], 3),
    ) == served["TFLite"]
    table = demo.readme_table(numbers)
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


def readme_demo_table():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return text[
        text.index(demo.README_BEGIN) + len(demo.README_BEGIN) : text.index(demo.README_END)
    ].strip()


def deterministic_rows(table):
    return [row for row in table.splitlines() if not row.startswith("| wall time")]


def test_readme_demo_table_is_rendered_from_demo_numbers(tmp_path):
    """README's table is `readme_table`'s rendering (the slow test below reruns the demo itself)."""
    table = readme_demo_table()
    assert table.startswith("| | `make demo` |") and len(table.splitlines()) == 8
    numbers = {float(x) for x in re.findall(r"\b0\.\d{3}\b", table)}
    assert len(numbers) >= 6


@pytest.mark.slow
def test_readme_demo_table_equals_a_fresh_make_demo(tmp_path):
    """`make demo`'s job, run afresh: README's demo table (all rows but the wall time) is what it
    prints. When this fails after a change that moves the numbers, run `make readme-demo` and commit
    README.md."""
    run = subprocess.run(
        [sys.executable, "-m", "keras_bert.demo", f"--model_dir={tmp_path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-5000:]
    with open(tmp_path / demo.SUMMARY_FILE, encoding="utf-8") as f:
        rendered = demo.readme_table(json.load(f))
    assert deterministic_rows(readme_demo_table()) == deterministic_rows(rendered), (
        "README.md's demo table differs from this run's numbers: run `make readme-demo`"
    )
