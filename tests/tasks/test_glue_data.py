"""GLUE data layer: every task's distributed file layout, real files, tfds, metrics, submissions."""

import logging
import math
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from finetune_cases import MNLI_FRONT

from keras_bert.tasks.glue import data as glue
from keras_bert.tasks.glue import metrics as glue_metrics
from keras_bert.tasks.glue import tfds_data
from keras_bert.tasks.glue.data import GlueDataError, InputExample
from keras_bert.testing.real_data import REAL_DATA  # noqa: E402

QUOTED = 'He said "yes" and left.'
OPEN_QUOTE = (
    '"An unbalanced quote opens this sentence.'  # Would swallow the next fields with csv quoting.
)
ACCENTED = "Le café était fermé — naïve 東京."
PLAIN = "The sailors rode the breeze clear of the rocks."

STSB_FRONT = (
    "index",
    "genre",
    "filename",
    "year",
    "old_index",
    "source1",
    "source2",
    "sentence1",
    "sentence2",
)
PARSE = ("( ( x ) )", "( y )", "(ROOT (S x))", "(ROOT (S y))")

# Each task's files in the GLUE distribution's layout (download_glue_data.py), as rows of fields.
FILES = {
    # train/dev: no header (source, label, original mark, sentence); test: index, sentence.
    "cola": {
        "CoLA/train.tsv": [("gj04", "1", "", PLAIN), ("cj99", "0", "*", OPEN_QUOTE)],
        "CoLA/dev.tsv": [("bc01", "1", "", ACCENTED)],
        "CoLA/test.tsv": [("index", "sentence"), ("0", QUOTED), ("1", ACCENTED)],
    },
    "sst2": {
        "SST-2/train.tsv": [
            ("sentence", "label"),
            ("it 's a charming journey . ", "1"),
            (QUOTED, "0"),
        ],
        "SST-2/dev.tsv": [("sentence", "label"), (ACCENTED, "1")],
        "SST-2/test.tsv": [("index", "sentence"), ("0", OPEN_QUOTE)],
    },
    "mrpc": {  # train/dev start with a UTF-8 byte-order mark, label first.
        "MRPC/train.tsv": [
            ("\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
            ("1", "702876", "702977", QUOTED, OPEN_QUOTE),
        ],
        "MRPC/dev.tsv": [
            ("\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
            ("0", "1355540", "1355592", ACCENTED, PLAIN),
        ],
        "MRPC/test.tsv": [
            ("index", "#1 ID", "#2 ID", "#1 String", "#2 String"),
            ("0", "1089874", "1089925", PLAIN, QUOTED),
        ],
    },
    "stsb": {
        "STS-B/train.tsv": [
            STSB_FRONT + ("score",),
            (
                "0",
                "main-captions",
                "MSRvid",
                "2012test",
                "0001",
                "none",
                "none",
                QUOTED,
                PLAIN,
                "5.000",
            ),
        ],
        "STS-B/dev.tsv": [
            STSB_FRONT + ("score",),
            (
                "0",
                "main-news",
                "headlines",
                "2015",
                "0002",
                "none",
                "none",
                ACCENTED,
                OPEN_QUOTE,
                "0.400",
            ),
        ],
        "STS-B/test.tsv": [
            STSB_FRONT,
            ("7", "main-news", "headlines", "2016", "0003", "none", "none", PLAIN, ACCENTED),
        ],
    },
    "qqp": {
        "QQP/train.tsv": [
            ("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
            ("133273", "213221", "213222", QUOTED, ACCENTED, "0"),
        ],
        "QQP/dev.tsv": [
            ("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
            ("201359", "303345", "303346", OPEN_QUOTE, PLAIN, "1"),
        ],
        "QQP/test.tsv": [("id", "question1", "question2"), ("0", ACCENTED, QUOTED)],
    },
    "mnli": {  # train: label1, gold_label; dev: label1..label5, gold_label; test: no labels.
        "MNLI/train.tsv": [
            MNLI_FRONT + ("label1", "gold_label"),
            ("0", "31193", "31193n", "government", *PARSE, QUOTED, PLAIN, "neutral", "neutral"),
        ],
        "MNLI/dev_matched.tsv": [
            MNLI_FRONT + ("label1", "label2", "label3", "label4", "label5", "gold_label"),
            (
                "0",
                "63735",
                "63735n",
                "slate",
                *PARSE,
                ACCENTED,
                QUOTED,
                "neutral",
                "entailment",
                "entailment",
                "entailment",
                "entailment",
                "entailment",
            ),
        ],
        "MNLI/dev_mismatched.tsv": [
            MNLI_FRONT + ("label1", "label2", "label3", "label4", "label5", "gold_label"),
            (
                "0",
                "75290",
                "75290c",
                "letters",
                *PARSE,
                PLAIN,
                OPEN_QUOTE,
                "contradiction",
                "contradiction",
                "neutral",
                "contradiction",
                "contradiction",
                "contradiction",
            ),
        ],
        "MNLI/test_matched.tsv": [
            MNLI_FRONT,
            ("0", "31493", "31493", "travel", *PARSE, OPEN_QUOTE, ACCENTED),
        ],
        "MNLI/test_mismatched.tsv": [
            MNLI_FRONT,
            ("0", "16130", "16130", "facetoface", *PARSE, PLAIN, QUOTED),
        ],
        "diagnostic/diagnostic.tsv": [
            ("index", "sentence1", "sentence2"),
            ("0", ACCENTED, OPEN_QUOTE),
            ("1", QUOTED, PLAIN),
        ],
    },
    "qnli": {
        "QNLI/train.tsv": [
            ("index", "question", "sentence", "label"),
            ("0", QUOTED, ACCENTED, "not_entailment"),
        ],
        "QNLI/dev.tsv": [
            ("index", "question", "sentence", "label"),
            ("0", PLAIN, OPEN_QUOTE, "entailment"),
        ],
        "QNLI/test.tsv": [("index", "question", "sentence"), ("0", ACCENTED, PLAIN)],
    },
    "rte": {
        "RTE/train.tsv": [
            ("index", "sentence1", "sentence2", "label"),
            ("0", OPEN_QUOTE, QUOTED, "entailment"),
        ],
        "RTE/dev.tsv": [
            ("index", "sentence1", "sentence2", "label"),
            ("0", ACCENTED, PLAIN, "not_entailment"),
        ],
        "RTE/test.tsv": [("index", "sentence1", "sentence2"), ("0", PLAIN, ACCENTED)],
    },
    "wnli": {
        "WNLI/train.tsv": [
            ("index", "sentence1", "sentence2", "label"),
            ("0", QUOTED, OPEN_QUOTE, "1"),
        ],
        "WNLI/dev.tsv": [("index", "sentence1", "sentence2", "label"), ("0", PLAIN, ACCENTED, "0")],
        "WNLI/test.tsv": [("index", "sentence1", "sentence2"), ("0", ACCENTED, QUOTED)],
    },
}

# (task, split) -> the examples read back: guid, text_a, text_b, label.
EXPECTED = {
    ("cola", "train"): [("train-1", PLAIN, None, "1"), ("train-2", OPEN_QUOTE, None, "0")],
    ("cola", "dev"): [("dev-1", ACCENTED, None, "1")],
    ("cola", "test"): [("0", QUOTED, None, None), ("1", ACCENTED, None, None)],
    ("sst2", "train"): [
        ("train-2", "it 's a charming journey . ", None, "1"),
        ("train-3", QUOTED, None, "0"),
    ],
    ("sst2", "dev"): [("dev-2", ACCENTED, None, "1")],
    ("sst2", "test"): [("0", OPEN_QUOTE, None, None)],
    ("mrpc", "train"): [("train-2", QUOTED, OPEN_QUOTE, "1")],
    ("mrpc", "dev"): [("dev-2", ACCENTED, PLAIN, "0")],
    ("mrpc", "test"): [("0", PLAIN, QUOTED, None)],
    ("stsb", "train"): [("train-2", QUOTED, PLAIN, 5.0)],
    ("stsb", "dev"): [("dev-2", ACCENTED, OPEN_QUOTE, 0.4)],
    ("stsb", "test"): [("7", PLAIN, ACCENTED, None)],
    ("qqp", "train"): [("train-2", QUOTED, ACCENTED, "0")],
    ("qqp", "dev"): [("dev-2", OPEN_QUOTE, PLAIN, "1")],
    ("qqp", "test"): [("0", ACCENTED, QUOTED, None)],
    ("mnli", "train"): [("train-2", QUOTED, PLAIN, "neutral")],
    ("mnli", "dev_matched"): [("dev_matched-2", ACCENTED, QUOTED, "entailment")],
    ("mnli", "dev_mismatched"): [("dev_mismatched-2", PLAIN, OPEN_QUOTE, "contradiction")],
    ("mnli", "test_matched"): [("0", OPEN_QUOTE, ACCENTED, None)],
    ("mnli", "test_mismatched"): [("0", PLAIN, QUOTED, None)],
    ("mnli", "ax"): [("0", ACCENTED, OPEN_QUOTE, None), ("1", QUOTED, PLAIN, None)],
    ("qnli", "train"): [("train-2", QUOTED, ACCENTED, "not_entailment")],
    ("qnli", "dev"): [("dev-2", PLAIN, OPEN_QUOTE, "entailment")],
    ("qnli", "test"): [("0", ACCENTED, PLAIN, None)],
    ("rte", "train"): [("train-2", OPEN_QUOTE, QUOTED, "entailment")],
    ("rte", "dev"): [("dev-2", ACCENTED, PLAIN, "not_entailment")],
    ("rte", "test"): [("0", PLAIN, ACCENTED, None)],
    ("wnli", "train"): [("train-2", QUOTED, OPEN_QUOTE, "1")],
    ("wnli", "dev"): [("dev-2", PLAIN, ACCENTED, "0")],
    ("wnli", "test"): [("0", ACCENTED, QUOTED, None)],
}

SUBMISSION_FILES = {
    ("cola", "test"): "CoLA.tsv",
    ("sst2", "test"): "SST-2.tsv",
    ("mrpc", "test"): "MRPC.tsv",
    ("stsb", "test"): "STS-B.tsv",
    ("qqp", "test"): "QQP.tsv",
    ("mnli", "test_matched"): "MNLI-m.tsv",
    ("mnli", "test_mismatched"): "MNLI-mm.tsv",
    ("mnli", "ax"): "AX.tsv",
    ("qnli", "test"): "QNLI.tsv",
    ("rte", "test"): "RTE.tsv",
    ("wnli", "test"): "WNLI.tsv",
}


def write_rows(path, rows, newline="\n"):
    """Writes rows of fields as a UTF-8 TSV file; returns the path as str."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join("\t".join(row) + newline for row in rows).encode("utf-8"))
    return str(path)


def write_task(root, task):
    """Writes all of `task`'s files under `root`; returns the task's folder."""
    for name, rows in FILES[task].items():
        write_rows(root / name, rows)
    return str(root / glue.SPECS[task].folder)


# === Every task's layout ===


def test_all_nine_tasks_and_their_splits():
    assert list(glue.SPECS) == [
        "cola",
        "sst2",
        "mrpc",
        "stsb",
        "qqp",
        "mnli",
        "qnli",
        "rte",
        "wnli",
    ]
    assert {(task, split) for task, split in EXPECTED} == {
        (name, split) for name, task in glue.SPECS.items() for split in task.splits
    }
    assert set(SUBMISSION_FILES) == {
        (name, split) for name, task in glue.SPECS.items() for split in task.predict_splits
    }


@pytest.mark.parametrize("task,split", sorted(EXPECTED))
def test_distributed_layout_reads_back(tmp_path, task, split):
    data_dir = write_task(tmp_path, task)
    examples = glue.read_examples(task, data_dir, split)
    assert [tuple(vars(e).values()) for e in examples] == EXPECTED[task, split]
    assert all(isinstance(e, InputExample) for e in examples)


def test_glue_root_and_ax_locations(tmp_path):
    mnli_dir = write_task(tmp_path, "mnli")
    # The GLUE root (holding MNLI/ and diagnostic/) works as data_dir too.
    assert glue.read_examples("MNLI", str(tmp_path), "dev_matched")[0].label == "entailment"
    assert len(glue.read_examples("mnli", str(tmp_path), "ax")) == 2
    # The diagnostic file inside the MNLI folder, or named AX.tsv, wins over the sibling folder.
    rows = [("index", "sentence1", "sentence2"), ("5", PLAIN, QUOTED)]
    for name in ("AX.tsv", "diagnostic.tsv"):
        write_rows(tmp_path / "MNLI" / name, rows)
        assert glue.read_examples("mnli", mnli_dir, "ax") == [
            InputExample("5", PLAIN, QUOTED, None)
        ]


def test_windows_line_endings(tmp_path):
    path = write_rows(tmp_path / "dev.tsv", FILES["rte"]["RTE/dev.tsv"], newline="\r\n")
    assert glue.read_examples("rte", os.path.dirname(path), "dev") == [
        InputExample("dev-2", ACCENTED, PLAIN, "not_entailment")
    ]


def test_task_definitions():
    mnli = glue.get_spec("mnli")
    assert mnli.labels == ("contradiction", "entailment", "neutral")
    assert mnli.main_metric == "accuracy_matched"
    assert mnli.eval_splits == {"dev_matched": "_matched", "dev_mismatched": "_mismatched"}
    assert mnli.predict_splits == {
        "test_matched": "MNLI-m.tsv",
        "test_mismatched": "MNLI-mm.tsv",
        "ax": "AX.tsv",
    }
    assert glue.get_spec("STS-B").is_regression and glue.get_spec("sts_b").labels is None
    assert not glue.get_spec("sst2").is_regression
    assert {name: task.main_metric for name, task in glue.SPECS.items()} == {
        "cola": "matthews_correlation",
        "sst2": "accuracy",
        "mrpc": "f1",
        "stsb": "pearson",
        "qqp": "f1",
        "mnli": "accuracy_matched",
        "qnli": "accuracy",
        "rte": "accuracy",
        "wnli": "accuracy",
    }
    assert {name: task.tfds_name for name, task in glue.SPECS.items()} == {
        name: f"glue/{name}" for name in glue.SPECS
    }
    assert glue.get_spec(mnli) is mnli


# === The real files ===

REAL = [  # folder, split, count, first example
    ("sst2", "dev", 872, ("dev-2", "it 's a charming and often affecting journey . ", None, "1")),
    (
        "mrpc",
        "dev",
        408,
        (
            "dev-2",
            "He said the foodservice pie business doesn't fit the company's long-term "
            "growth strategy.",
            '"The foodservice pie business does not fit our long-term growth strategy.',
            "1",
        ),
    ),
    (
        "mrpc",
        "train",
        3668,
        (
            "train-2",
            'Amrozi accused his brother, whom he called "the witness", of '
            "deliberately distorting his evidence.",
            'Referring to him as only "the witness", '
            "Amrozi accused his brother of deliberately distorting his evidence.",
            "1",
        ),
    ),
    ("cola", "dev", 1043, ("dev-1", "The sailors rode the breeze clear of the rocks.", None, "1")),
    (
        "stsb",
        "dev",
        1500,
        ("dev-2", "A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.", 5.0),
    ),
    (
        "rte",
        "dev",
        277,
        (
            "dev-2",
            "Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer "
            "at age 44, according to the Christopher Reeve Foundation.",
            "Christopher Reeve had an accident.",
            "not_entailment",
        ),
    ),
]


@pytest.mark.skipif(not os.path.isdir(REAL_DATA), reason="no real data folder")
@pytest.mark.parametrize("task,split,count,first", REAL, ids=[f"{t}-{s}" for t, s, _, _ in REAL])
def test_real_files(task, split, count, first):
    examples = glue.read_examples(task, os.path.join(REAL_DATA, task), split)
    assert len(examples) == count
    assert tuple(vars(examples[0]).values()) == first
    if glue.SPECS[task].is_regression:
        assert all(0.0 <= e.label <= 5.0 for e in examples)
    else:
        assert {e.label for e in examples} == set(glue.SPECS[task].labels)
    assert len({e.guid for e in examples}) == count


# === tensorflow-datasets ===

TFDS_NAMES = {  # tfds ClassLabel name -> our label where they differ, written out independently.
    "cola": {"unacceptable": "0", "acceptable": "1"},
    "sst2": {"negative": "0", "positive": "1"},
    "mrpc": {"not_equivalent": "0", "equivalent": "1"},
    "qqp": {"not_duplicate": "0", "duplicate": "1"},
    "wnli": {"not_entailment": "0", "entailment": "1"},
}
TFDS_TEXTS = {  # tfds text features (text_a, text_b) of each config.
    "cola": ("sentence",),
    "sst2": ("sentence",),
    "mrpc": ("sentence1", "sentence2"),
    "stsb": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"),
    "wnli": ("sentence1", "sentence2"),
}
TFDS_SPLITS = {
    "train": "train",
    "dev": "validation",
    "test": "test",
    "dev_matched": "validation_matched",
    "dev_mismatched": "validation_mismatched",
    "test_matched": "test_matched",
    "test_mismatched": "test_mismatched",
    "ax": "test",
}


def _known_examples(rows):
    """A tfds `as_dataset_fn` that yields `rows[split]` (a dict of columns) for each split."""

    def as_dataset(self, split, **kwargs):
        return tf.data.Dataset.from_tensor_slices(rows[str(split)])

    return as_dataset


def test_tfds_mnli_labels_map_by_name():
    # glue/mnli's ClassLabel order is entailment, neutral, contradiction; ours is alphabetical.
    rows = {
        "validation_matched": {
            "premise": [QUOTED, ACCENTED, PLAIN],
            "hypothesis": [PLAIN, QUOTED, ACCENTED],
            "label": [0, 1, 2],
            "idx": [4, 2, 9],
        },
        "test": {"premise": [ACCENTED], "hypothesis": [PLAIN], "label": [-1], "idx": [3]},
    }
    with tfds.testing.mock_data(
        policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=_known_examples(rows)
    ):
        assert tfds.builder("glue/mnli").info.features["label"].names == [
            "entailment",
            "neutral",
            "contradiction",
        ]
        examples = tfds_data.read_tfds("mnli", "dev_matched")
        ax = tfds_data.read_tfds("mnli", "ax")
    assert examples == [  # sorted by idx
        InputExample("dev_matched-2", ACCENTED, QUOTED, "neutral"),
        InputExample("dev_matched-4", QUOTED, PLAIN, "entailment"),
        InputExample("dev_matched-9", PLAIN, ACCENTED, "contradiction"),
    ]
    assert ax == [InputExample("3", ACCENTED, PLAIN, None)]


def test_tfds_stsb_scores_and_unlabelled_test():
    rows = {
        "validation": {
            "sentence1": [QUOTED, PLAIN],
            "sentence2": [ACCENTED, QUOTED],
            "label": np.array([3.25, 0.0], np.float32),
            "idx": [0, 1],
        },
        "test": {
            "sentence1": [PLAIN],
            "sentence2": [ACCENTED],
            "label": np.array([-1.0], np.float32),
            "idx": [0],
        },
    }
    with tfds.testing.mock_data(
        policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=_known_examples(rows)
    ):
        assert tfds_data.read_tfds("stsb", "dev") == [
            InputExample("dev-0", QUOTED, ACCENTED, 3.25),
            InputExample("dev-1", PLAIN, QUOTED, 0.0),
        ]
        assert tfds_data.read_tfds("stsb", "test") == [InputExample("0", PLAIN, ACCENTED, None)]


@pytest.mark.parametrize("task", list(glue.SPECS))
def test_tfds_every_task_and_split(task):
    """Random examples fabricated from each glue/<task> feature spec, compared with the raw
    records."""
    spec = glue.SPECS[task]
    with tfds.testing.mock_data(num_examples=4, policy=tfds.testing.MockPolicy.USE_CODE):
        for split in spec.splits:
            name = "glue/ax" if split == "ax" else f"glue/{task}"
            raw = sorted(
                tfds.as_numpy(tfds.load(name, split=TFDS_SPLITS[split])), key=lambda r: r["idx"]
            )
            names = None if spec.is_regression else tfds.builder(name).info.features["label"].names
            examples = tfds_data.read_tfds(task, split)
            assert len(examples) == len(raw) == 4
            for example, record in zip(examples, raw):
                texts = [record[k].decode() for k in TFDS_TEXTS[task]]
                assert [example.text_a, example.text_b] == (texts + [None])[:2]
                if split in spec.predict_splits:
                    assert (example.guid, example.label) == (str(record["idx"]), None)
                    continue
                assert example.guid == f"{split}-{record['idx']}"
                if spec.is_regression:
                    assert example.label == pytest.approx(float(record["label"]))
                else:
                    name = names[record["label"]]
                    assert example.label == TFDS_NAMES.get(task, {}).get(name, name)


def test_tfds_bad_labels():
    rte = glue.get_spec("rte")
    features = {"sentence1": b"a", "sentence2": b"b", "label": 2, "idx": 7}
    with pytest.raises(GlueDataError, match=r"glue/rte idx 7: label id 2 outside"):
        tfds_data.example_from_tfds(
            rte, "dev", features, ["entailment", "not_entailment"], where="glue/rte"
        )
    with pytest.raises(GlueDataError, match=r"'maybe' is not one of entailment, not_entailment"):
        tfds_data.example_from_tfds(rte, "dev", features, ["entailment", "x", "maybe"])
    with pytest.raises(GlueDataError, match=r"idx 7: empty 'sentence2'"):
        tfds_data.example_from_tfds(
            rte, "dev", dict(features, sentence2=b" "), ["entailment", "not_entailment"]
        )


# === Metrics ===

# Binary: TP 3, FN 1, FP 1, TN 5 (hand-counted).
GOLD = ["1", "1", "1", "1", "0", "0", "0", "0", "0", "0"]
PRED = ["1", "1", "1", "0", "1", "0", "0", "0", "0", "0"]


def test_binary_metrics_against_confusion_matrix():
    tp, fn, fp, tn = 3, 1, 1, 5
    accuracy = (tp + tn) / 10
    f1 = 2 * tp / (2 * tp + fp + fn)
    mcc = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert (accuracy, f1, mcc) == pytest.approx((0.8, 0.75, 14 / 24))
    assert glue_metrics.compute_metrics("mrpc", GOLD, PRED) == pytest.approx(
        {"f1": f1, "accuracy": accuracy}
    )
    assert glue_metrics.compute_metrics("qqp", GOLD, PRED) == pytest.approx(
        {"f1": f1, "accuracy": accuracy}
    )
    assert glue_metrics.compute_metrics("cola", GOLD, PRED) == pytest.approx(
        {"matthews_correlation": mcc}
    )
    for task in ("sst2", "wnli"):
        assert glue_metrics.compute_metrics(task, GOLD, PRED) == pytest.approx(
            {"accuracy": accuracy}
        )
    assert glue_metrics.compute_metrics("cola", GOLD, GOLD) == {"matthews_correlation": 1.0}


def test_multiclass_accuracy():
    gold = ["entailment", "neutral", "contradiction", "neutral"]
    pred = ["entailment", "contradiction", "contradiction", "neutral"]
    assert glue_metrics.compute_metrics("mnli", gold, pred) == {"accuracy": 0.75}
    assert glue_metrics.compute_metrics(
        "rte", ["entailment", "not_entailment"], ["not_entailment"] * 2
    ) == {"accuracy": 0.5}


def test_regression_metrics_against_formulas():
    gold = np.array([0.0, 1.5, 2.0, 3.8, 4.5, 5.0])
    pred = np.array([0.4, 1.0, 2.9, 3.1, 4.9, 4.0])

    def pearson(x, y):
        dx, dy = x - x.mean(), y - y.mean()
        return float((dx * dy).sum() / math.sqrt((dx * dx).sum() * (dy * dy).sum()))

    ranks_gold, ranks_pred = (
        np.array([1, 2, 3, 4, 5, 6.0]),
        np.array([1, 2, 3, 4, 6, 5.0]),
    )  # No ties.
    d2 = ((ranks_gold - ranks_pred) ** 2).sum()
    spearman = 1 - 6 * d2 / (6 * (36 - 1))
    metrics = glue_metrics.compute_metrics("stsb", list(gold), list(pred))
    assert metrics == pytest.approx({"pearson": pearson(gold, pred), "spearman": spearman})
    assert spearman == pytest.approx(1 - 12 / 210)


def test_correlation_of_constant_predictions_is_zero_not_nan():
    # A regression head often predicts one value early on: NaN would never be beaten as the best
    # epoch.
    gold = [0.0, 1.5, 2.0, 3.8]
    assert glue_metrics.compute_metrics("stsb", gold, [2.5] * 4) == {
        "pearson": 0.0,
        "spearman": 0.0,
    }
    assert glue_metrics.compute_metrics("stsb", [3.0] * 4, gold) == {
        "pearson": 0.0,
        "spearman": 0.0,
    }


def test_metric_input_errors():
    with pytest.raises(GlueDataError, match=r"'2' is not one of 0, 1"):
        glue_metrics.compute_metrics("cola", ["0", "1"], ["0", "2"])
    with pytest.raises(GlueDataError, match=r"2 labels and 1 predictions"):
        glue_metrics.compute_metrics("sst2", ["0", "1"], ["0"])
    with pytest.raises(GlueDataError, match=r"0 labels"):
        glue_metrics.compute_metrics("stsb", [], [])


# === Submission files ===


@pytest.mark.parametrize("task,split", sorted(SUBMISSION_FILES))
def test_submission_round_trip(tmp_path, task, split):
    spec = glue.SPECS[task]
    examples = [InputExample(str(i), PLAIN, None, None) for i in (0, 1, 2, 10)]
    if spec.is_regression:
        predictions, written = [5.7, -0.2, 2.34567, 1], ["5.000", "0.000", "2.346", "1.000"]
    else:
        predictions = written = [spec.labels[i % len(spec.labels)] for i in range(4)]
    path = glue.write_submission(task, split, examples, predictions, str(tmp_path / "out"))
    assert path == str(tmp_path / "out" / SUBMISSION_FILES[task, split])
    assert glue.read_submission(path) == list(zip(["0", "1", "2", "10"], written))
    with open(path, encoding="utf-8") as f:
        assert f.readline() == "index\tprediction\n"
    assert not os.path.exists(path + ".tmp")


def test_submission_from_test_file(tmp_path):
    write_task(tmp_path, "cola")
    examples = glue.read_examples("cola", tmp_path / "CoLA", "test")  # pathlib paths work too.
    path = glue.write_submission("cola", "test", examples, ["1", "0"], tmp_path)
    assert glue.read_submission(path) == [("0", "1"), ("1", "0")]


def test_submission_errors(tmp_path):
    examples = [InputExample("0", PLAIN, None, None)]
    with pytest.raises(GlueDataError, match=r"prediction 'yes' is not one of 0, 1"):
        glue.write_submission("sst2", "test", examples, ["yes"], str(tmp_path))
    with pytest.raises(
        GlueDataError, match=r"no test split 'dev'; valid: test_matched, test_mismatched, ax"
    ):
        glue.write_submission("mnli", "dev", examples, ["neutral"], str(tmp_path))
    with pytest.raises(GlueDataError, match=r"1 examples but 2 predictions"):
        glue.write_submission("sst2", "test", examples, ["0", "1"], str(tmp_path))
    with pytest.raises(GlueDataError, match=r"not finite"):
        glue.write_submission("stsb", "test", examples, [float("nan")], str(tmp_path))
    bad = write_rows(tmp_path / "bad.tsv", [("index", "label"), ("0", "1")])
    with pytest.raises(GlueDataError, match=rf"{re.escape(bad)}:1: expected the header"):
        glue.read_submission(bad)
    bad = write_rows(tmp_path / "bad2.tsv", [("index", "prediction"), ("0", "1"), ("1",)])
    with pytest.raises(
        GlueDataError, match=rf"{re.escape(bad)}:3: expected 2 tab-separated fields, found 1"
    ):
        glue.read_submission(bad)
    with pytest.raises(GlueDataError, match="No such submission file"):
        glue.read_submission(str(tmp_path / "missing.tsv"))


# === Bad input ===


def test_unknown_task_and_split(tmp_path):
    with pytest.raises(
        GlueDataError, match=r"Unknown GLUE task 'sst'; did you mean 'sst2'\? Valid tasks: cola, "
    ):
        glue.get_spec("sst")
    with pytest.raises(ValueError, match=r"did you mean 'mnli'"):
        glue.get_spec("mnlii")
    with pytest.raises(GlueDataError, match=r"no split 'dev_matched'; valid: train, dev, test"):
        glue.read_examples("cola", str(tmp_path), "dev_matched")
    with pytest.raises(GlueDataError, match=r"no split 'validation'"):
        tfds_data.read_tfds("rte", "validation")


def test_missing_file_names_paths_and_expected_names(tmp_path):
    with pytest.raises(GlueDataError) as error:
        glue.read_examples("rte", str(tmp_path), "dev")
    assert str(tmp_path / "dev.tsv") in str(error.value) and str(
        tmp_path / "RTE" / "dev.tsv"
    ) in str(error.value)
    with pytest.raises(
        GlueDataError, match=r"expected diagnostic.tsv or AX.tsv or ../diagnostic/diagnostic.tsv"
    ):
        glue.read_examples("mnli", str(tmp_path), "ax")


RTE_HEADER = ("index", "sentence1", "sentence2", "label")
BAD_ROWS = [  # task, rows (the bad one is line 3), message
    (
        "rte",
        [RTE_HEADER, ("0", PLAIN, QUOTED, "entailment"), ("1", PLAIN, "entailment")],
        r"expected 4 tab-separated fields \(index, sentence1, sentence2, label\), found 3",
    ),
    (
        "rte",
        [
            RTE_HEADER,
            ("0", PLAIN, QUOTED, "entailment"),
            ("1", PLAIN, "a\ttab", QUOTED, "entailment"),
        ],
        r"expected 4 tab-separated fields .*found 6",
    ),
    (
        "rte",
        [RTE_HEADER, ("0", PLAIN, QUOTED, "entailment"), ("1", PLAIN, QUOTED, "maybe")],
        r"label 'maybe' is not one of entailment, not_entailment",
    ),
    (
        "cola",
        [("gj04", "1", "", PLAIN), ("gj04", "1", "", PLAIN), ("gj04", "2", "", PLAIN)],
        r"label '2' is not one of 0, 1",
    ),
    ("sst2", [("sentence", "label"), (PLAIN, "1"), ("  ", "0")], r"empty 'sentence'"),
    (
        "rte",
        [RTE_HEADER, ("0", PLAIN, QUOTED, "entailment"), ("1", PLAIN, "", "entailment")],
        r"empty 'sentence2'",
    ),
    (
        "stsb",
        [STSB_FRONT + ("score",), ("0",) * 9 + ("1.0",), ("0",) * 9 + ("high",)],
        r"score 'high' is not a number",
    ),
    (
        "stsb",
        [STSB_FRONT + ("score",), ("0",) * 9 + ("1.0",), ("0",) * 9 + ("7.5",)],
        r"score 7.5 is not in \[0.0, 5.0\]",
    ),
]


@pytest.mark.parametrize("task,rows,message", BAD_ROWS)
def test_bad_row_names_file_and_line(tmp_path, task, rows, message):
    path = write_rows(tmp_path / "dev.tsv", rows)
    with pytest.raises(GlueDataError, match=rf"^{re.escape(path)}:3: {message}"):
        glue.read_examples(task, str(tmp_path), "dev")


def test_bad_header_empty_index_and_bad_utf8(tmp_path):
    path = write_rows(
        tmp_path / "dev.tsv",
        [("index", "sentence1", "sentence2", "gold"), ("0", PLAIN, PLAIN, "0")],
    )
    with pytest.raises(
        GlueDataError, match=rf"^{re.escape(path)}:1: no column 'label' in the header \(index, "
    ):
        glue.read_examples("wnli", str(tmp_path), "dev")
    path = write_rows(tmp_path / "test.tsv", [("index", "sentence"), ("0", PLAIN), (" ", PLAIN)])
    with pytest.raises(GlueDataError, match=rf"^{re.escape(path)}:3: empty 'index'"):
        glue.read_examples("sst2", str(tmp_path), "test")
    path = str(tmp_path / "train.tsv")
    write_rows(tmp_path / "train.tsv", [("sentence", "label"), ("fine", "1")])
    with open(path, "ab") as f:
        f.write(b"bad \xff byte\t0\n")
    with pytest.raises(GlueDataError, match=rf"^{re.escape(path)}:3: invalid UTF-8"):
        glue.read_examples("sst2", str(tmp_path), "train")
    write_rows(tmp_path / "train.tsv", [("sentence", "label")])
    with pytest.raises(GlueDataError, match=r"train.tsv: no examples"):
        glue.read_examples("sst2", str(tmp_path), "train")
    (tmp_path / "train.tsv").write_bytes(b"")
    with pytest.raises(GlueDataError, match=r"train.tsv:1: empty file, expected a header"):
        glue.read_examples("sst2", str(tmp_path), "train")


QQP_HEADER = ("id", "qid1", "qid2", "question1", "question2", "is_duplicate")


def test_qqp_skips_malformed_rows_with_a_logged_count(tmp_path, caplog):
    rows = [
        QQP_HEADER,
        ("1", "2", "3", QUOTED, PLAIN, "1"),
        (
            "\tWas Muhammad a real historical figure?",
            "0",
        ),  # A row broken by a newline, as in QQP train.
        ("4", "5", "6", ACCENTED, "", "0"),
        ("7", "8", "9", PLAIN, ACCENTED, "0"),
    ]
    path = write_rows(tmp_path / "train.tsv", rows)
    with caplog.at_level(logging.WARNING):
        examples = glue.read_examples("qqp", str(tmp_path), "train")
    assert examples == [
        InputExample("train-2", QUOTED, PLAIN, "1"),
        InputExample("train-5", PLAIN, ACCENTED, "0"),
    ]
    assert f"{path}: skipped 2 malformed rows (lines 3, 4)" in caplog.text
    with pytest.raises(GlueDataError, match=rf"^{re.escape(path)}:3: expected 6"):
        glue.read_examples("qqp", str(tmp_path), "train", skip_malformed=False)
    # Other tasks raise by default but may skip too; test splits never skip.
    path = write_rows(
        tmp_path / "dev.tsv", [RTE_HEADER, ("0", PLAIN, QUOTED, "entailment"), ("1", PLAIN)]
    )
    assert len(glue.read_examples("rte", str(tmp_path), "dev", skip_malformed=True)) == 1
    path = write_rows(tmp_path / "test.tsv", [("id", "question1", "question2"), ("0", PLAIN)])
    with pytest.raises(GlueDataError, match=rf"^{re.escape(path)}:2: expected 3"):
        glue.read_examples("qqp", str(tmp_path), "test")
