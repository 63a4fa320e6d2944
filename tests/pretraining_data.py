"""Tiny pre-training TFRecords in the original format, written by the tests themselves.

A toy language with learnable structure: a sentence is an arithmetic run of word ids
(start a, stride d: a, a+d, a+2d, ... wrapping inside the word ids), so a masked token is
predictable from its neighbours; segment B continues A's run (IsNext, label 0) or is a run
from elsewhere (NotNext, label 1). Masking: 15% of the word positions (at least one, at most
max_predictions_per_seq), 80% [MASK] / 10% random / 10% unchanged, as in the original.
"""

import numpy as np
import tensorflow as tf

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
FIRST_WORD = 5


def toy_example(rng, vocab_size, seq_length, max_predictions_per_seq):
    """One example as a dict of NumPy arrays with the original feature names."""
    words = vocab_size - FIRST_WORD
    run = lambda start, stride, n: [FIRST_WORD + (start + stride * i) % words for i in range(n)]  # noqa: E731
    budget = seq_length - 3
    len_a = int(rng.integers(3, budget // 2 + 1))
    len_b = int(rng.integers(3, budget - len_a + 1))
    start, stride = int(rng.integers(words)), int(rng.integers(1, 4))
    is_random = rng.random() < 0.5
    a = run(start, stride, len_a)
    b = (
        run(int(rng.integers(words)), int(rng.integers(1, 4)), len_b)
        if is_random
        else run(start + stride * len_a, stride, len_b)
    )
    tokens = [CLS] + a + [SEP] + b + [SEP]
    segments = [0] * (len_a + 2) + [1] * (len_b + 1)
    candidates = [i for i, t in enumerate(tokens) if t not in (CLS, SEP)]
    num = min(max_predictions_per_seq, max(1, int(round(len(tokens) * 0.15))))
    positions = sorted(rng.choice(candidates, size=num, replace=False).tolist())
    ids = [tokens[p] for p in positions]
    for p in positions:
        r = rng.random()
        if r < 0.8:
            tokens[p] = MASK
        elif r < 0.9:
            tokens[p] = int(rng.integers(FIRST_WORD, vocab_size))
    pad = seq_length - len(tokens)
    extra = max_predictions_per_seq - num
    return {
        "input_ids": np.array(tokens + [PAD] * pad),
        "input_mask": np.array([1] * len(tokens) + [0] * pad),
        "segment_ids": np.array(segments + [0] * pad),
        "masked_lm_positions": np.array(positions + [0] * extra),
        "masked_lm_ids": np.array(ids + [0] * extra),
        "masked_lm_weights": np.array([1.0] * num + [0.0] * extra, dtype=np.float32),
        "next_sentence_labels": np.array([int(is_random)]),
    }


def serialize(example):
    """A feature dict -> serialized `tf.train.Example` (int64 and float lists)."""
    feature = {}
    for name, value in example.items():
        if value.dtype.kind == "f":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value.tolist()))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value.tolist()))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(
    directory,
    num_examples,
    *,
    vocab_size=64,
    seq_length=32,
    max_predictions_per_seq=5,
    num_shards=1,
    seed=0,
    prefix="train",
):
    """Write `num_shards` files `<prefix>-0000i.tfrecord`; returns (glob pattern, examples list)."""
    rng = np.random.default_rng(seed)
    examples = [
        toy_example(rng, vocab_size, seq_length, max_predictions_per_seq)
        for _ in range(num_examples)
    ]
    for shard in range(num_shards):
        with tf.io.TFRecordWriter(f"{directory}/{prefix}-{shard:05d}.tfrecord") as writer:
            for example in examples[shard::num_shards]:
                writer.write(serialize(example))
    return f"{directory}/{prefix}-*.tfrecord", examples
