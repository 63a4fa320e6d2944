"""Pre-training example creation throughput: keras_bert vs the original algorithm, one run.

The original is tf-models-official's `create_pretraining_data` (the google-research/bert script):
`create_training_instances` (Python `FullTokenizer`, pairs, masking) +
`write_instance_to_example_files`. Ours is `keras_bert.pretraining.create_pretraining_data`. Same
generated corpus (original format), same settings, end to end from the corpus file to TFRecords
(tokenizer set-up and, for several workers, process start-up included), after a warm-up of each on a
tiny corpus.

    .venv/bin/python bench/bench_pretraining_data.py [--num_documents 3000] [--dupe_factor 2]
        [--whole_word_masking]
"""

import argparse
import os
import random
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_documents", type=int, default=3000)
    parser.add_argument("--dupe_factor", type=int, default=2)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--whole_word_masking", action="store_true")
    return parser.parse_args(argv)


# --help answers before the imports below. The workers (spawned processes) import this file again,
# as __mp_main__, and with it those imports, as they always have: their start-up is timed.
if __name__ == "__main__":
    ARGS = parse_args()

import tensorflow as tf  # noqa: E402
from official.nlp.data import create_pretraining_data as original  # noqa: E402
from official.nlp.tools import tokenization  # noqa: E402

import keras_bert.text.tokenizer  # noqa: E402,F401  (imports happen before timing, on both sides)
from keras_bert.pretraining.create_pretraining_data import create_pretraining_data  # noqa: E402


def write_corpus_and_vocab(directory, num_documents, seed=0):
    """A corpus of random words (stems + "##" suffixes, ~1/4 multi-piece) and its vocabulary."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    stems = sorted(
        {"".join(rng.choice(letters) for _ in range(rng.randint(3, 8))) for _ in range(8000)}
    )
    suffixes = ["s", "ed", "ing", "ly", "er", "est", "ment", "ness"]
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += list(".,;:!?") + stems + ["##" + s for s in suffixes]
    vocab_file = os.path.join(directory, "vocab.txt")
    with open(vocab_file, "w") as f:
        f.write("\n".join(vocab) + "\n")
    corpus_file = os.path.join(directory, "corpus.txt")
    with open(corpus_file, "w") as f:
        for _ in range(num_documents):
            for _ in range(rng.randint(2, 16)):
                words = [
                    rng.choice(stems) + (rng.choice(suffixes) if rng.random() < 0.25 else "")
                    for _ in range(rng.randint(5, 25))
                ]
                f.write(" ".join(words).capitalize() + ".\n")
            f.write("\n")
    return corpus_file, vocab_file


def count(files):
    examples = tokens = 0
    spec = {"input_mask": tf.io.FixedLenFeature([ARGS.max_seq_length], tf.int64)}
    for batch in (
        tf.data.TFRecordDataset(files).batch(1024).map(lambda r: tf.io.parse_example(r, spec))
    ):
        examples += int(batch["input_mask"].shape[0])
        tokens += int(tf.reduce_sum(batch["input_mask"]))
    return examples, tokens


def run_original(corpus_file, vocab_file, out_dir):
    start = time.perf_counter()
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    instances = original.create_training_instances(
        [corpus_file],
        tokenizer,
        original.get_processor_text_fn(False, True),
        ARGS.max_seq_length,
        ARGS.dupe_factor,
        0.1,
        0.15,
        ARGS.max_predictions_per_seq,
        random.Random(12345),
        do_whole_word_mask=ARGS.whole_word_masking,
    )
    path = os.path.join(out_dir, "original.tfrecord")
    original.write_instance_to_example_files(
        instances,
        tokenizer,
        ARGS.max_seq_length,
        ARGS.max_predictions_per_seq,
        [path],
        False,
        False,
    )
    return time.perf_counter() - start, [path]


def run_ours(corpus_file, vocab_file, out_dir, num_workers):
    start = time.perf_counter()
    files = create_pretraining_data(
        corpus_file,
        os.path.join(out_dir, f"ours{num_workers}"),
        vocab_file,
        max_seq_length=ARGS.max_seq_length,
        max_predictions_per_seq=ARGS.max_predictions_per_seq,
        dupe_factor=ARGS.dupe_factor,
        whole_word_masking=ARGS.whole_word_masking,
        num_shards=4,
        num_workers=num_workers,
    )
    return time.perf_counter() - start, files


def main():
    tf.get_logger().setLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file, vocab_file = write_corpus_and_vocab(tmp, ARGS.num_documents)
        # Warm-up on a tiny corpus: one-time process costs (TensorFlow runtime, first tracing) are
        # not creation throughput. Worker processes are started inside each timed run.
        warm_dir = os.path.join(tmp, "warm")
        os.makedirs(warm_dir)
        warm_corpus, _ = write_corpus_and_vocab(warm_dir, 20, seed=1)
        run_original(warm_corpus, vocab_file, warm_dir)
        run_ours(warm_corpus, vocab_file, warm_dir, 1)
        rows = [("original (tf-models-official)", *run_original(corpus_file, vocab_file, tmp))]
        for workers in ARGS.workers:
            rows.append(
                (
                    f"keras_bert, {workers} worker(s)",
                    *run_ours(corpus_file, vocab_file, tmp, workers),
                )
            )
        base_rate = None
        print(
            f"\ncorpus {os.path.getsize(corpus_file) / 1e6:.1f} MB, {ARGS.num_documents} "
            f"documents, max_seq_length {ARGS.max_seq_length}, dupe_factor {ARGS.dupe_factor}, "
            f"whole_word_masking {ARGS.whole_word_masking}, {os.cpu_count()} CPUs"
        )
        print(
            f"{'implementation':34s} {'seconds':>8s} {'examples':>9s} {'examples/s':>11s} "
            f"{'tokens/s':>10s} {'ratio':>6s}"
        )
        for name, seconds, files in rows:
            examples, tokens = count(files)
            rate = examples / seconds
            base_rate = base_rate or rate
            print(
                f"{name:34s} {seconds:8.2f} {examples:9d} {rate:11.0f} {tokens / seconds:10.0f} "
                f"{rate / base_rate:5.1f}x"
            )


if __name__ == "__main__":
    common.run_and_record(main, __file__)
