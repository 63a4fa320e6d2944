"""Small learnable tasks in the GLUE distribution's formats, and a tiny model to fine-tune."""

import os

import numpy as np

import keras_bert
from keras_bert import checkpoints

WORDS = [
    "the",
    "movie",
    "film",
    "plot",
    "actor",
    "was",
    "is",
    "really",
    "quite",
    "very",
    "a",
    "an",
    "story",
    "and",
    "but",
    "with",
    "scenes",
    "music",
    "it",
    "this",
]
POSITIVE, NEGATIVE = ["good", "great", "fine", "lovely"], ["bad", "awful", "poor", "boring"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS + POSITIVE + NEGATIVE
TINY = dict(
    vocab_size=len(VOCAB),
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)


def sentiment_rows(n, seed):
    """(sentence, label) with label 1 iff the sentence holds a positive word; lengths 3..24
    words."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        label = int(rng.integers(2))
        words = list(rng.choice(WORDS, size=int(rng.integers(2, 24))))
        words.insert(
            int(rng.integers(len(words) + 1)), str(rng.choice(POSITIVE if label else NEGATIVE))
        )
        rows.append((" ".join(words) + " .", label))
    return rows


def write_sst2(directory, n_train=256, n_dev=96, n_test=40, seed=0):
    """train.tsv / dev.tsv (header sentence, label) and test.tsv (header index, sentence) as
    SST-2's."""
    os.makedirs(directory, exist_ok=True)
    for name, n, offset in (("train", n_train, 0), ("dev", n_dev, 1)):
        with open(os.path.join(directory, f"{name}.tsv"), "w") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{s}\t{label}\n" for s, label in sentiment_rows(n, seed + offset))
    with open(os.path.join(directory, "test.tsv"), "w") as f:
        f.write("index\tsentence\n")
        f.writelines(f"{i}\t{s}\n" for i, (s, _) in enumerate(sentiment_rows(n_test, seed + 2)))
    return directory


def write_checkpoint(directory, seed=0, **config):
    """A tiny random BERT as a Google checkpoint directory with its vocab.txt."""
    keras_bert_config = keras_bert.BertConfig(**dict(TINY, **config))
    import keras

    keras.utils.set_random_seed(seed)
    encoder = keras_bert.BertEncoder(keras_bert_config)
    checkpoints.save(encoder, directory, format="google", vocab=VOCAB)
    return directory


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
