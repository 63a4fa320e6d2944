"""Tokenization throughput: keras_bert BertTokenizer vs Hugging Face tokenizers vs the original.

All three tokenize the same generated multilingual corpus (`keras_bert.testing.corpus`, scaled up)
with the same WordPiece vocabulary and lower-casing setting; exact-id agreement with the
original Python FullTokenizer (tf-models-official) is measured on the lines the original
tokenized. Hugging Face runs `encode_batch` (Rust, all cores); ours runs batched in a
tf.function and in a tf.data pipeline with parallel map (all cores).

    .venv/bin/python bench/bench_tokenizer.py [--lines 20000] [--cased] [--batch 512]
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)

from keras_bert.testing.corpus import build_test_vocabulary, generate_corpus  # noqa: E402


def hf_tokenizer(vocab_path, lower_case, max_chars):
    """Hugging Face's BERT pipeline (as BertWordPieceTokenizer) with the original's limit."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(
        models.WordPiece.from_file(
            vocab_path, unk_token="[UNK]", max_input_chars_per_word=max_chars
        )
    )
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=lower_case, lowercase=lower_case
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def best_time(fn, repeats):
    """Best wall-clock seconds, the CPU seconds (all threads) of that run, and the result."""
    runs = []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        runs.append((time.perf_counter() - start, time.process_time() - cpu))
    wall, cpu = min(runs)
    return (wall, cpu), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument(
        "--reference_lines",
        type=int,
        default=2000,
        help="lines tokenized by the (slow) original, for speed and agreement",
    )
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--cased", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import tensorflow as tf
    from official.nlp.tools import tokenization

    from keras_bert.text import BertTokenizer

    lower_case = not args.cased

    lines = generate_corpus(args.lines, seed=1)
    data = [line.encode("utf-8") for line in lines]
    megabytes = sum(map(len, data)) / 1e6
    vocab = build_test_vocabulary(
        lines[:5000], tokenization.BasicTokenizer(do_lower_case=lower_case), size=30000
    )
    vocab_path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    print(
        f"corpus: {len(lines)} lines, {megabytes:.2f} MB; vocabulary: {len(vocab)} tokens; "
        f"lower_case={lower_case}; cores: {os.cpu_count()}"
    )

    # Ours: batched in a tf.function, and in tf.data with a parallel map.
    ours = BertTokenizer(vocab, lower_case=lower_case)
    tokenize = tf.function(ours, reduce_retracing=True)
    batches = [tf.constant(data[i : i + args.batch]) for i in range(0, len(data), args.batch)]

    def run_function():
        return [tokenize(b) for b in batches]

    dataset = (
        tf.data.Dataset.from_tensor_slices(data)
        .batch(args.batch)
        .map(ours, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    def run_dataset():
        return [b for b in dataset]

    run_function(), run_dataset()  # Trace and warm up.
    t_function, our_batches = best_time(run_function, args.repeats)
    t_dataset, _ = best_time(run_dataset, args.repeats)
    our_ids = [row for b in our_batches for row in b.to_list()]

    # Hugging Face tokenizers (Rust), encode_batch on all cores.
    hf = hf_tokenizer(vocab_path, lower_case, ours.max_chars_per_word)
    hf.encode_batch(lines[:1000], add_special_tokens=False)
    t_hf, encodings = best_time(
        lambda: hf.encode_batch(lines, add_special_tokens=False), args.repeats
    )
    hf_ids = [e.ids for e in encodings]

    # The original Python tokenizer, on the first reference_lines lines.
    reference = tokenization.FullTokenizer(vocab_path, do_lower_case=lower_case)
    reference.wordpiece_tokenizer.max_input_chars_per_word = ours.max_chars_per_word
    n_ref = min(args.reference_lines, len(lines))
    (wall, cpu), ref_ids = best_time(
        lambda: [
            reference.convert_tokens_to_ids(reference.tokenize(line)) for line in lines[:n_ref]
        ],
        1,
    )
    t_ref = (wall * len(lines) / n_ref, cpu * len(lines) / n_ref)  # Scaled to the whole corpus.

    def agreement(ids, skip_sigma=False):
        pairs = [
            (a, b) for a, b, line in zip(ids, ref_ids, lines) if not (skip_sigma and "Σ" in line)
        ]
        return sum(a == b for a, b in pairs) / len(pairs)

    rows = [
        ("keras_bert (tf.data, parallel map)", t_dataset, our_ids),
        ("keras_bert (tf.function, batched)", t_function, our_ids),
        ("HF tokenizers encode_batch", t_hf, hf_ids),
        ("original FullTokenizer (Python)", t_ref, ref_ids),
    ]
    t_ours = min(t_dataset, t_function)
    print(
        "\nwall: best of the repeats (machine shared: see also CPU seconds, all threads);"
        " 'exact ids' on the first lines, 'no Σ' without lines holding a capital sigma"
    )
    print(
        f"{'tokenizer':36s} {'texts/s':>9s} {'MB/s':>7s} {'ours x':>7s} {'texts/cpu-s':>11s} "
        f"{'ours x':>7s} {'exact ids':>9s} {'no Σ':>8s}"
    )
    for name, (wall, cpu), ids in rows:
        exact, exact_no_sigma = agreement(ids), agreement(ids, skip_sigma=True)
        print(
            f"{name:36s} {len(lines) / wall:9.0f} {megabytes / wall:7.2f} {wall / t_ours[0]:7.2f} "
            f"{len(lines) / cpu:11.0f} {cpu / t_ours[1]:7.2f} {exact:9.2%} {exact_no_sigma:8.2%}"
        )
    print(
        f"\nours vs HF: {t_hf[0] / t_ours[0]:.2f}x wall, {t_hf[1] / t_ours[1]:.2f}x CPU; "
        f"ours vs original: {t_ref[0] / t_ours[0]:.1f}x wall."
    )
    if lower_case:
        print(
            "Uncased: texts holding a capital sigma take the final-sigma path "
            "(keras_bert.text.tokenizer.FinalSigma); 'no Σ' shows the lines without one."
        )


if __name__ == "__main__":
    common.run_and_record(main, __file__)
