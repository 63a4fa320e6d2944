"""A small learnable task in SST-2's format (a sentence holds a positive or a negative word) and a
tiny random BERT to fine-tune on it, as a Google checkpoint: a run of the whole path in seconds.

    data_dir = write_sst2("data/SST-2")
    init_checkpoint = write_checkpoint("ckpt", num_hidden_layers=2)
"""

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
    """A tiny random BERT (`TINY`, updated by `config`) as a Google checkpoint directory with its
    vocab.txt."""
    import keras

    keras_bert_config = keras_bert.BertConfig(**dict(TINY, **config))
    keras.utils.set_random_seed(seed)
    encoder = keras_bert.BertEncoder(keras_bert_config)
    checkpoints.save(encoder, directory, format="google", vocab=VOCAB)
    return directory
