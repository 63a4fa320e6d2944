"""The text_classification task: the user's own label<TAB>text files, read strictly; labels from
the training file; a fine-tune through the runner that learns the file's labels and writes the
output contract (task.json with the labels, predictions/test_results.tsv)."""

import json
import os

import numpy as np
import pytest
from finetune_cases import sentiment_rows, write_checkpoint

from keras_bert.tasks import registry
from keras_bert.tasks.finetune import run_finetuning
from keras_bert.tasks.text_classification.task import (
    TextClassification,
    TextClassificationDataError,
    read_tsv,
)


def _write(path, text, mode="w"):
    with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
        f.write(text)
    return str(path)


def labelled_rows(n, seed):
    """(label, sentence): "positive" iff the sentence holds a positive word (`finetune_cases`)."""
    return [
        (("negative", "positive")[label], sentence) for sentence, label in sentiment_rows(n, seed)
    ]


def test_reads_label_tab_text_strictly(tmp_path):
    path = _write(
        tmp_path / "train.tsv", "\ufefflabel\ttext\nspam\tBuy now!\n\nham\t  Kept as written \r\n"
    )
    examples = read_tsv(path)
    assert [(e.guid, e.label, e.text) for e in examples] == [
        ("train-2", "spam", "Buy now!"),
        ("train-4", "ham", "  Kept as written "),
    ]
    test = read_tsv(
        _write(tmp_path / "test.tsv", "just a text\nham\tlabelled\n"), "test", require_labels=False
    )
    assert [(e.label, e.text) for e in test] == [(None, "just a text"), ("ham", "labelled")]
    bad = {
        "no tab\n": ":1: expected label<TAB>text, found 1",
        "a\tb\tc\td\n": ":1: expected label<TAB>text, found 4",
        "x\ty\n\t text\n": ":2: empty label",
        "x\t  \n": ":1: empty text",
        "\n\n": "no examples",
    }
    for i, (content, message) in enumerate(bad.items()):
        with pytest.raises(TextClassificationDataError, match=message):
            read_tsv(_write(tmp_path / f"bad{i}.tsv", content))
    with pytest.raises(TextClassificationDataError, match=r"bad\.tsv:2: invalid UTF-8"):
        read_tsv(_write(tmp_path / "bad.tsv", b"a\tfine\nb\t\xff\xfe\n", "wb"))
    with pytest.raises(TextClassificationDataError, match="No such file"):
        read_tsv(str(tmp_path / "missing.tsv"))


def test_labels_come_from_the_training_file(tmp_path):
    task = registry.get_task("text_classification")
    assert isinstance(task, TextClassification) and task.name == "text_classification"
    _write(tmp_path / "train.tsv", "b\tone\nc\ttwo\na\tthree\nb\tfour\n")
    _write(tmp_path / "dev.tsv", "c\tfive\n")
    # The dev split is read first by the runner: the labels are read from train.tsv beside it.
    assert [e.label for e in task.read(str(tmp_path), "dev")] == ["c"]
    assert task.labels == ["a", "b", "c"] and task.info()["labels"] == ["a", "b", "c"]
    _write(tmp_path / "dev.tsv", "a\tfine\nd\tnot a training label\n")
    with pytest.raises(
        TextClassificationDataError, match=r"dev\.tsv:2: label 'd' is not in the training file's"
    ):
        task.read(str(tmp_path), "dev")
    with pytest.raises(ValueError, match="not tensorflow-datasets"):
        task.read(str(tmp_path), "train", use_tfds=True)
    with pytest.raises(ValueError, match="takes its labels from the training file"):
        registry.get_task("text_classification").build_model(None, 0.1)


def test_fine_tunes_your_own_labels(tmp_path):
    data = tmp_path / "data"
    os.makedirs(data)
    for split, n, seed in (("train", 256, 0), ("dev", 96, 1), ("test", 12, 2)):
        _write(
            data / f"{split}.tsv",
            "label\ttext\n" + "".join(f"{label}\t{t}\n" for label, t in labelled_rows(n, seed)),
        )
    model_dir = str(tmp_path / "run")
    summary = run_finetuning(
        task="text_classification",
        data_dir=str(data),
        init_checkpoint=write_checkpoint(str(tmp_path / "ckpt")),
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        do_predict=True,
        learning_rate=3e-3,
        num_train_epochs=5,
        batch_size=16,
        seq_length=64,
        verbose=False,
        plot=False,
    )
    assert summary["eval"]["accuracy"] >= 0.9, summary["eval_history"]
    assert set(summary["eval"]) == {"accuracy", "macro_f1"}
    with open(os.path.join(model_dir, "model", "task.json")) as f:
        info = json.load(f)
    assert (info["task"], info["problem"], info["labels"], info["text_inputs"]) == (
        "text_classification",
        "classification",
        ["negative", "positive"],
        ["text"],
    )
    with open(os.path.join(model_dir, "predictions", "test_results.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    assert rows[0] == ["index", "prediction"] and [r[0] for r in rows[1:]] == [
        str(i) for i in range(2, 14)
    ]
    truth = [label for label, _ in labelled_rows(12, 2)]
    assert np.mean([r[1] == t for r, t in zip(rows[1:], truth)]) >= 0.75
