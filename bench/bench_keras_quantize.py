"""Keras' own `model.quantize(...)` on a fine-tuned task model, on each backend: labels kept
against the float model, and the time per batch of each.

The fine-tuned classifier (`model/model.keras` of a `keras-bert-finetune` run) is loaded on each
Keras backend in its own process, run in float, quantized with `model.quantize(mode)` and run
again, on the same token ids (tokenized once here with the run's vocabulary). Labels kept: the
share of rows whose int8 argmax equals the float argmax; decided: the same among rows whose float
top probability is at least 0.6.

    .venv/bin/python bench/bench_keras_quantize.py [--model_dir=runs/mrpc/model] \
        [--data=../shared/data/mrpc/dev.tsv] [--backends=tensorflow,jax] [--modes=int8]

The defaults: runs/mrpc/model, which `make bench-model` makes, and the real data folder's MRPC dev
file.

Measured here (2026-11-27, all-MiniLM-L6-v2 fine-tuned on MRPC, dev 408 pairs): see the output's
JSON line; the README quotes it.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

import common  # bench/: the script's own folder
import numpy as np
from backends import parse_backends

SCRIPT = os.path.abspath(__file__)
DECIDED = 0.6  # Float top probability from which a row counts as decided.


def read_rows(path):
    """GLUE TSV rows -> (texts_a, texts_b or None): SST-2 (sentence), MRPC (#1/#2 String)."""
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header, rows = rows[0], rows[1:]
    if "#1 String" in header:
        a, b = header.index("#1 String"), header.index("#2 String")
        return [r[a] for r in rows], [r[b] for r in rows]
    return [r[header.index("sentence")] for r in rows], None


def tokenize(model_dir, data, out):
    """Token ids of the data's rows with the run's vocabulary and casing (TensorFlow)."""
    import tensorflow as tf

    from keras_bert.text.preprocessor import BertPreprocessor
    from keras_bert.text.tokenizer import BertTokenizer

    with open(os.path.join(model_dir, "task.json")) as f:
        info = json.load(f)
    tokenizer = BertTokenizer(os.path.join(model_dir, info["vocab_file"]), info["lower_case"])
    preprocessor = BertPreprocessor(tokenizer, seq_length=info["seq_length"])
    a, b = read_rows(data)
    texts = (tf.constant(a),) if b is None else (tf.constant(a), tf.constant(b))
    ids = {k: v.numpy() for k, v in preprocessor(texts).items()}
    np.savez(out, **ids)
    return len(a)


def run_backend(model_path, ids_path, modes, batch_size, out):
    """(In the backend's process.) Float and quantized logits and times."""
    import keras

    import keras_bert.models.task_models  # noqa: F401 (registers the classes the file names)

    ids = dict(np.load(ids_path))
    rows = len(ids["input_word_ids"])

    def logits(model):
        outputs, start = [], time.perf_counter()
        for i in range(0, rows, batch_size):
            batch = {k: v[i : i + batch_size] for k, v in ids.items()}
            outputs.append(keras.ops.convert_to_numpy(model.predict_on_batch(batch)["logits"]))
        return np.concatenate(outputs), time.perf_counter() - start

    results = {}
    model = keras.saving.load_model(model_path)
    logits(model)  # Warm-up (compilation).
    results["float"], results["float_seconds"] = logits(model)
    for mode in modes:
        model = keras.saving.load_model(model_path)
        model.quantize(mode)
        logits(model)
        results[mode], results[f"{mode}_seconds"] = logits(model)
    np.savez(out, **results)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def main():
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    common.add_classifier_args(parser)
    parser.add_argument("--backends", default="tensorflow,jax")
    parser.add_argument("--modes", default="int8")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = args.modes.split(",")
    model_path = os.path.join(args.model_dir, "model.keras")
    if args.worker:
        run_backend(model_path, args.worker[0], modes, args.batch_size, args.worker[2])
        return
    common.require_model(args.model_dir)
    common.require_data(args.data, "--data")
    backends = parse_backends(args.backends)  # Unknown or missing ones: before any work.
    work = tempfile.mkdtemp()
    ids_path = os.path.join(work, "ids.npz")
    rows = tokenize(args.model_dir, args.data, ids_path)
    summary = {"model_dir": args.model_dir, "data": args.data, "rows": rows, "backends": {}}
    for backend in backends:
        out = os.path.join(work, f"{backend}.npz")
        env = dict(os.environ, KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="")
        command = [sys.executable, SCRIPT, f"--model_dir={args.model_dir}", f"--data={args.data}"]
        command += [f"--modes={args.modes}", "--worker", ids_path, backend, out]
        subprocess.run(command, env=env, check=True)
        got = dict(np.load(out))
        probs = softmax(got["float"])
        labels = probs.argmax(-1)
        decided = probs.max(-1) >= DECIDED
        row = {"float_ms_per_row": 1000 * float(got["float_seconds"]) / rows}
        for mode in modes:
            kept = got[mode].argmax(-1) == labels
            row[mode] = {
                "labels_kept": float(kept.mean()),
                "decided_kept": float(kept[decided].mean()),
                "decided": int(decided.sum()),
                "max_prob_change": float(np.abs(softmax(got[mode]) - probs).max()),
                "ms_per_row": 1000 * float(got[f"{mode}_seconds"]) / rows,
            }
            print(
                f"{backend:>10} {mode:>6}: labels kept {kept.mean():.2%} "
                f"({kept[decided].mean():.2%} of {decided.sum()} decided), speed vs float "
                f"{float(got['float_seconds']) / float(got[f'{mode}_seconds']):.2f}x"
            )
        summary["backends"][backend] = row
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
