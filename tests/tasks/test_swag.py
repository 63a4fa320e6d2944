"""SWAG: the official CSV format (quotes, commas, the unnamed index column), bad records, the
four sequences per example, accuracy, the predictions file, the recipe, and fine-tuning end to
end."""

import csv
import json
import os

import numpy as np
import pytest
from finetune_cases import NEGATIVE, POSITIVE, VOCAB, WORDS, write_checkpoint
from task_cases import SWAG_HEADER as HEADER

from keras_bert.tasks import registry
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.tasks.swag.task import SwagDataError, SwagExample, read_swag
from keras_bert.text.tokenizer import BertTokenizer

ROWS = [
    [
        "0",
        "lsmdc1052_Harry_Potter_and_the_order_of_phoenix-94857",
        "18313",
        "Students lower their eyes nervously. She",
        "Students lower their eyes nervously.",
        "She",
        "gold",
        "pats her shoulder, then saunters toward someone.",
        "turns with two students.",
        "walks slowly towards someone.",
        'wheels around as her dog "thunders" out.',
        "2",
    ],
    [
        "1",
        "anetv_dm5WXFiQZUQ",
        "18419",
        "He rides, then stops. He",
        "He rides,\nthen stops.",
        "He",
        "gen",
        "a",
        "b",
        "c",
        "d",
        "0",
    ],
]


def _write_csv(path, rows, header=HEADER):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def test_reads_the_official_csv(tmp_path):
    path = _write_csv(tmp_path / "val.csv", ROWS)
    with open(path, "a") as f:
        f.write("\n\n")  # Blank lines are skipped.
    examples = read_swag(path)
    assert examples == [
        SwagExample(
            {"": "0", "video-id": ROWS[0][1], "fold-ind": "18313"},
            "Students lower their eyes nervously.",
            "She",
            (
                "pats her shoulder, then saunters toward someone.",
                "turns with two students.",
                "walks slowly towards someone.",
                'wheels around as her dog "thunders" out.',
            ),
            2,
        ),
        SwagExample(
            {"": "1", "video-id": "anetv_dm5WXFiQZUQ", "fold-ind": "18419"},
            "He rides,\nthen stops.",
            "He",
            ("a", "b", "c", "d"),
            0,
        ),
    ]
    assert examples[0].choices()[3] == (
        "Students lower their eyes nervously.",
        'She wheels around as her dog "thunders" out.',
    )


def test_reads_unlabelled_test_and_files_without_the_index_column(tmp_path):
    test = read_swag(
        _write_csv(tmp_path / "test.csv", [r[:-1] for r in ROWS], HEADER[:-1]), labelled=False
    )
    assert [e.label for e in test] == [None, None] and test[1].endings == ("a", "b", "c", "d")
    plain = read_swag(_write_csv(tmp_path / "plain.csv", [r[1:] for r in ROWS], HEADER[1:]))
    assert [e.ids for e in plain] == [
        {"": "0", "video-id": ROWS[0][1], "fold-ind": "18313"},
        {"": "1", "video-id": ROWS[1][1], "fold-ind": "18419"},
    ]
    task = registry.get_task("swag")
    assert len(task.read(str(tmp_path), "test")) == 2
    assert task.read(None, "dev", file=str(tmp_path / "plain.csv")) == plain
    with pytest.raises(ValueError, match="no SWAG"):
        task.read(str(tmp_path), "dev", use_tfds=True)


def _with(row, column, value):
    row = list(row)
    row[HEADER.index(column)] = value
    return row


@pytest.mark.parametrize(
    "rows, header, message",
    [
        (
            [ROWS[1], ROWS[0][:-1]],
            HEADER,
            r"record 2 \(line 4\): 11 fields, the header has 12",
        ),  # Record 1: 2 lines.
        (
            [ROWS[0], _with(ROWS[1], "label", "4")],
            HEADER,
            r"record 2 \(line 3\): label '4' is not an ending index 0..3",
        ),
        ([_with(ROWS[0], "label", "x")], HEADER, r"record 1 \(line 2\): label 'x'"),
        ([_with(ROWS[0], "label", "")], HEADER, r"record 1 \(line 2\): label ''"),
        ([_with(ROWS[0], "ending1", " ")], HEADER, r"record 1 \(line 2\): empty ending1"),
        ([r[:10] + r[11:] for r in ROWS], HEADER[:10] + HEADER[11:], "missing column.* ending3"),
        (
            [r[:-1] for r in ROWS],
            HEADER[:-1],
            "missing column.* label",
        ),  # Train and val need labels.
    ],
)
def test_bad_records_name_file_and_record(tmp_path, rows, header, message):
    path = _write_csv(tmp_path / "train.csv", rows, header)
    with pytest.raises(SwagDataError, match=f"train.csv.*{message}"):
        read_swag(path)


def test_empty_files(tmp_path):
    (tmp_path / "a.csv").write_text("")
    with pytest.raises(SwagDataError, match="a.csv: empty file"):
        read_swag(str(tmp_path / "a.csv"))
    with pytest.raises(SwagDataError, match="b.csv: no records"):
        read_swag(_write_csv(tmp_path / "b.csv", []))


def test_four_sequences_per_example():
    tokenizer = BertTokenizer(VOCAB)
    examples = [
        SwagExample(
            {"": "0"}, "the movie was", "it", ("good", "bad .", "very very very boring", "fine"), 3
        ),
        SwagExample({"": "1"}, "a plot", "", ("great", "poor", "awful", "lovely"), 0),
    ]
    feats = registry.get_task("swag").encode(examples, tokenizer, seq_length=10)
    ids = feats.inputs["input_word_ids"]
    assert ids.shape[:2] == [2, 4] and feats.labels["label"].tolist() == [3, 0]

    def tokens(i, k):
        return " ".join(tokenizer.id_to_token(t) for t in ids[i][k].numpy())

    assert tokens(0, 0) == "[CLS] the movie was [SEP] it good [SEP]"
    assert tokens(0, 1) == "[CLS] the movie was [SEP] it bad . [SEP]"
    assert (
        tokens(0, 2) == "[CLS] the movie was [SEP] it very very very [SEP]"
    )  # Longest first, to 10 tokens.
    assert tokens(1, 3) == "[CLS] a plot [SEP] lovely [SEP]"  # An empty sent2 adds nothing.
    assert feats.inputs["input_type_ids"][0][1].numpy().tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert feats.lengths.tolist() == [10, 6]  # The longest choice of each example.


def test_accuracy_and_predictions_file(tmp_path):
    task = registry.get_task("swag")
    examples = [
        SwagExample({"": str(i), "video-id": f"v{i}"}, "c", "s", ("a", "b", "c", "d"), label)
        for i, label in enumerate([0, 3, 1, 2])
    ]
    logits = np.array(
        [[2.0, 0, 0, 0], [0, 0, 0, 1.0], [0, 0, 5.0, 0], [np.log(3.0), 0, 0, 0]], np.float32
    )
    assert task.evaluate(examples, None, {"logits": logits}) == {
        "accuracy": 0.5
    }  # Examples 0 and 1 right.
    [path] = task.write_predictions("test", examples, None, {"logits": logits}, str(tmp_path))
    assert os.path.basename(path) == "test_predictions.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == ["0", "1", "2", "3"] and rows[2]["video-id"] == "v2"
    assert [int(r["prediction"]) for r in rows] == [0, 3, 2, 0]
    probs = np.array([[float(r[f"prob{i}"]) for i in range(4)] for r in rows])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        probs[3], [0.5, 1 / 6, 1 / 6, 1 / 6], atol=1e-6
    )  # softmax(log 3, 0, 0, 0)


def test_recipe_is_the_papers(tmp_path):
    config = FinetuneConfig(
        task="swag", init_checkpoint="unused", model_dir=str(tmp_path), do_train=True
    )
    assert (config.learning_rate, config.batch_size, config.num_train_epochs) == (2e-5, 16, 3)


# === Fine-tuning end to end ===


def _rows(n, seed, labelled=True):
    """SWAG rows where the right ending is the one with a positive word (the others: negative)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = int(rng.integers(4))
        endings = [
            " ".join(rng.choice(WORDS, size=int(rng.integers(1, 5))))
            + " "
            + str(rng.choice(POSITIVE if k == label else NEGATIVE))
            + " ."
            for k in range(4)
        ]
        context = (
            " ".join(rng.choice(WORDS, size=int(rng.integers(3, 10))))
            + " , "
            + str(rng.choice(WORDS))
        )
        sent2 = str(rng.choice(["the", "it", "this"]))
        rows.append(
            [
                str(i),
                f"anetv_{seed}_{i}",
                str(1000 + i),
                f"{context} {sent2}",
                context,
                sent2,
                "gold",
                *endings,
            ]
            + ([str(label)] if labelled else [])
        )
    return rows


@pytest.fixture(scope="module")
def swag_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("swag")
    _write_csv(root / "train.csv", _rows(192, 0))
    _write_csv(root / "val.csv", _rows(64, 1))
    _write_csv(root / "test.csv", _rows(20, 2, labelled=False), HEADER[:-1])
    return dict(data_dir=str(root), init_checkpoint=write_checkpoint(str(root / "ckpt")))


def test_fine_tune_learns_swag(swag_dir, tmp_path):
    model_dir = str(tmp_path / "run")
    summary = run_finetuning(
        task="swag",
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        do_predict=True,
        learning_rate=3e-3,
        num_train_epochs=2,
        seq_length=32,
        verbose=False,
        plot=False,
        **swag_dir,
    )
    assert summary["eval"]["accuracy"] >= 0.9, summary["eval_history"]  # Chance: 0.25.
    with open(os.path.join(model_dir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["task"] == "swag" and results["accuracy"] == summary["eval"]["accuracy"]
    with open(os.path.join(model_dir, "model", "task.json")) as f:
        info = json.load(f)
    assert info["problem"] == "multiple_choice" and info["num_choices"] == 4
    with open(os.path.join(model_dir, "predictions", "test_predictions.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == [str(i) for i in range(20)]
    # The test rows follow the same rule: the positive ending is the right one.
    truth = [
        next(k for k in range(4) if r[7 + k].split()[-2] in POSITIVE)
        for r in _rows(20, 2, labelled=False)
    ]
    assert np.mean([int(r["prediction"]) == t for r, t in zip(rows, truth)]) >= 0.8
