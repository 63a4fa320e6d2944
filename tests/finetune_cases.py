"""Small learnable tasks in the GLUE distribution's formats, and a tiny model to fine-tune (the
SST-2 task and the model are `keras_bert.testing.tiny_tasks`, shared with the benchmarks)."""

import os

import numpy as np

from keras_bert.testing.tiny_tasks import (  # noqa: F401 (the tests import them from here)
    NEGATIVE,
    POSITIVE,
    TINY,
    VOCAB,
    WORDS,
    sentiment_rows,
    write_checkpoint,
    write_sst2,
)

MNLI_FRONT = (
    "index",
    "promptID",
    "pairID",
    "genre",
    "sentence1_binary_parse",
    "sentence2_binary_parse",
    "sentence1_parse",
    "sentence2_parse",
    "sentence1",
    "sentence2",
)
MNLI_LABELS = ("contradiction", "entailment", "neutral")


def _tsv(path, rows):
    with open(path, "w") as f:
        f.writelines("\t".join(map(str, row)) + "\n" for row in rows)


def write_mnli(directory, n=24, seed=0):
    """MNLI's files as distributed: train (label1, gold_label), dev_matched/mismatched (label1..5,
    gold_label), test_matched/mismatched (no labels) and the AX diagnostic (index, sentence1,
    sentence2)."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    pairs = [(a, b) for (a, _), (b, _) in zip(sentiment_rows(n, seed), sentiment_rows(n, seed + 1))]
    labels = [MNLI_LABELS[i] for i in rng.integers(3, size=n)]

    def front(i, a, b):
        return (
            i,
            1000 + i,
            f"{1000 + i}e",
            "fiction",
            "( x )",
            "( y )",
            "(ROOT x)",
            "(ROOT y)",
            a,
            b,
        )

    _tsv(
        os.path.join(directory, "train.tsv"),
        [MNLI_FRONT + ("label1", "gold_label")]
        + [front(i, a, b) + (label, label) for i, ((a, b), label) in enumerate(zip(pairs, labels))],
    )
    for split in ("dev_matched", "dev_mismatched"):
        _tsv(
            os.path.join(directory, f"{split}.tsv"),
            [MNLI_FRONT + tuple(f"label{k}" for k in range(1, 6)) + ("gold_label",)]
            + [
                front(i, a, b) + (label,) * 6
                for i, ((a, b), label) in enumerate(zip(pairs, labels))
            ],
        )
    for split, count in (("test_matched", 7), ("test_mismatched", 5)):
        _tsv(
            os.path.join(directory, f"{split}.tsv"),
            [MNLI_FRONT] + [front(i, a, b) for i, (a, b) in enumerate(pairs[:count])],
        )
    _tsv(
        os.path.join(directory, "diagnostic.tsv"),
        [("index", "sentence1", "sentence2")] + [(i, a, b) for i, (a, b) in enumerate(pairs[:3])],
    )
    return directory


def write_stsb(directory, n_train=96, n_dev=32, seed=0):
    """STS-B's files (train/dev with score, test without): two sentences of the same sentiment,
    scored 5 when positive and 1 when negative (learnable)."""
    os.makedirs(directory, exist_ok=True)
    header = (
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
    for name, n, offset in (("train", n_train, 0), ("dev", n_dev, 10)):
        rows = sentiment_rows(2 * n, seed + offset)
        positive = [s for s, label in rows if label]
        negative = [s for s, label in rows if not label]
        pairs = [(a, b, 5.0) for a, b in zip(positive[0::2], positive[1::2])] + [
            (a, b, 1.0) for a, b in zip(negative[0::2], negative[1::2])
        ]
        _tsv(
            os.path.join(directory, f"{name}.tsv"),
            [header + ("score",)]
            + [
                (i, "main-news", "x", "2012", i, "none", "none", a, b, score)
                for i, (a, b, score) in enumerate(pairs)
            ],
        )
    _tsv(
        os.path.join(directory, "test.tsv"),
        [header]
        + [
            (i, "main-news", "x", "2012", i, "none", "none", a, a)
            for i, (a, _) in enumerate(sentiment_rows(6, 99))
        ],
    )
    return directory
