"""The CPU server path side by side: our SavedModel in float32 and int8 against ONNX Runtime in
float32 and dynamic int8, on the same weights, real dev texts in, one run.

A fine-tuned classifier's `model/` (`--model_dir`, default runs/mrpc/model: all-MiniLM-L6-v2
fine-tuned on MRPC, which `make bench-model` makes; `--data` its dev file, by default the real data
folder's mrpc/dev.tsv) is exported here:

- `savedmodel_fp32`, `savedmodel_int8`: `export_saved_model(..., quantize="none" / "int8")`,
  reloaded with `tf.saved_model.load`, `serving_default` on raw strings (tokenized in the graph,
  each batch padded to its longest row): what TF Serving runs;
- `ort_fp32`: the same weights as a Hugging Face `BertForSequenceClassification` (the encoder
  through `keras_bert.checkpoints.save(format="huggingface")`, the head copied), exported by
  `torch.onnx.export`, run by ONNX Runtime (`ORT_ENABLE_ALL`); `ort_int8`: that file through
  `onnxruntime.quantization.quantize_dynamic` (int8 weights, uint8 activations per call). Both
  take raw strings through the same vocabulary's `BertTokenizerFast` (padding to the longest);
- `tflite_dynamic_range` (batch 1 only, `--tflite`): `export_tflite(quantize="dynamic_range")`,
  the LiteRT interpreter with tensorflow-text's kernels;
- `keras_hub` (`--keras_hub`): keras-hub's pipeline on the same weights, its
  `BertTextClassifierPreprocessor` (padding to `--seq_length`) and `BertTextClassifier` in one
  tf.function (as bench_serving.py builds them).

Each thread count runs in its own process (TensorFlow's thread pools are set once per process;
ORT and LiteRT get the same count). Batch 32: every dev row in batches of 32 in file order, each
batch given to every peer before the next batch (interleaved), `--rounds` rounds; batch 1: the
first `--texts` rows, one at a time, interleaved likewise. Reported per peer: the median over
rounds of ms per row, the spread (min-max of the rounds), and the ratio to `ort_int8` (median of
the per-round ratios). Labels kept: the share of all dev rows whose argmax equals
`savedmodel_fp32`'s, and among the decided rows (its top probability at least `DECIDED`).

    .venv/bin/python bench/bench_serving_int8.py [--model_dir DIR --data dev.tsv]
        [--threads 1,2] [--batch_sizes 1,32] [--rounds 3] [--texts 100] [--no-tflite]
        [--no-ort_spinning] [--no-keras_hub] [--work DIR]

Needs the `onnx` extra (onnxruntime, onnx) and transformers with torch (CPU).

TensorFlow's threads are set as TF Serving's flags set them: `threads` intra-op
(`--tensorflow_intra_op_parallelism`), one inter-op (`--tensorflow_inter_op_parallelism=1`: one
request's ops run in order, each split over the intra-op threads). int8 SavedModels answer a
batch of one in their single-request graph (`keras_bert.export.single_request`).

Results: bench/out/bench_serving_int8.json (`common.run_and_record`: the tables, command,
machine and versions), from which docs/results/data/serving-int8.json (the serving results page)
is made.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402

DECIDED = 0.6  # Float top probability from which a row counts as decided.
BASE = "ort_int8"


def read_rows(path):
    """Rows of texts of a GLUE dev file (SST-2: (sentence,); MRPC: (string 1, string 2))."""
    from bench_tflite import read_dev

    return read_dev(path)[0]


def export_all(model_dir, work, seq_length, with_tflite):
    """Writes every peer's model under `work`; returns {name: path} and the HF directory."""
    import tensorflow as tf

    from keras_bert.export import export_saved_model, tflite

    paths = {}
    for name, quantize in (("savedmodel_fp32", "none"), ("savedmodel_int8", "int8")):
        paths[name] = export_saved_model(
            model_dir,
            os.path.join(work, name),
            quantize=quantize,
            warmup_requests=False,
            seq_length=seq_length,
        )
    hf_dir = export_onnx(model_dir, work, seq_length)
    paths["ort_fp32"] = os.path.join(work, "model.onnx")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    paths["ort_int8"] = os.path.join(work, "model_int8.onnx")
    quantize_dynamic(paths["ort_fp32"], paths["ort_int8"], weight_type=QuantType.QInt8)
    if with_tflite:
        path = tflite.export_tflite(
            model_dir, os.path.join(work, "tflite"), quantize="dynamic_range"
        )
        paths["tflite_dynamic_range"] = path
    del tf
    return paths, hf_dir


def export_onnx(model_dir, work, seq_length):
    """The fine-tuned classifier as a Hugging Face model (its encoder saved by keras_bert, its
    head copied) exported to work/model.onnx; returns the HF directory (with vocab.txt)."""
    import torch
    from transformers import BertForSequenceClassification

    from keras_bert import checkpoints
    from keras_bert.export.source import load_source

    source = load_source(model_dir)
    hf_dir = os.path.join(work, "hf")
    checkpoints.save(
        source.encoder,
        hf_dir,
        format="huggingface",
        vocab=list(source.tokenizer.vocabulary),
    )
    head = source.model.get_layer("classifier")
    kernel, bias = (np.asarray(w) for w in head.get_weights())
    model = BertForSequenceClassification.from_pretrained(hf_dir, num_labels=kernel.shape[1])
    with torch.no_grad():
        model.classifier.weight.copy_(torch.from_numpy(kernel.T))
        model.classifier.bias.copy_(torch.from_numpy(bias))
    model.eval()
    ids = torch.ones((2, 8), dtype=torch.long)
    torch.onnx.export(
        model,
        (ids, ids, torch.zeros_like(ids)),
        os.path.join(work, "model.onnx"),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["logits"],
        dynamic_axes={
            n: {0: "batch", 1: "sequence"}
            for n in ("input_ids", "attention_mask", "token_type_ids")
        },
        opset_version=17,
        dynamo=False,
    )
    return hf_dir


def peers(paths, hf_dir, threads, seq_length, lower_case, spinning=True, keras_hub_model=None):
    """name -> function(rows of texts) -> probabilities [N, C] (numpy), in this process;
    keras-hub's pipeline on `keras_hub_model`'s weights where that `model/` is given."""
    import onnxruntime as ort
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops for tf.saved_model.load)
    from transformers import BertTokenizerFast

    calls = {}
    for name in ("savedmodel_fp32", "savedmodel_int8"):
        function = tf.saved_model.load(paths[name]).signatures["serving_default"]
        names = [s.name for s in function.structured_input_signature[1].values()]
        names = sorted(names, key=lambda n: (n != "text", n))  # text, text_b

        def call(rows, function=function, names=names):
            texts = {n: tf.constant([r[i] for r in rows]) for i, n in enumerate(names)}
            return function(**texts)["probabilities"].numpy()

        calls[name] = call
    tokenizer = BertTokenizerFast(os.path.join(hf_dir, "vocab.txt"), do_lower_case=lower_case)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if not spinning:  # Idle threads sleep instead of spinning (kinder to a shared machine).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    for name in ("ort_fp32", "ort_int8"):
        session = ort.InferenceSession(paths[name], options, providers=["CPUExecutionProvider"])

        def call(rows, session=session):
            columns = [list(c) for c in zip(*rows)]
            encoded = tokenizer(
                *columns,
                padding="longest",
                truncation=True,
                max_length=seq_length,
                return_tensors="np",
            )
            logits = session.run(None, {k: v.astype(np.int64) for k, v in encoded.items()})[0]
            return softmax(logits)

        calls[name] = call
    if keras_hub_model:
        calls["keras_hub"] = keras_hub_call(keras_hub_model, seq_length, lower_case)
    if "tflite_dynamic_range" in paths:
        from bench_tflite import runner_calls

        calls["tflite_dynamic_range"] = runner_calls(
            paths["tflite_dynamic_range"], ["text", "text_b"][: len(names)], threads
        )
    return calls


def keras_hub_call(model_dir, seq_length, lower_case):
    """keras-hub's `BertTextClassifierPreprocessor` and `BertTextClassifier` (our weights, as
    bench_serving.py builds them) in one tf.function: rows of texts -> probabilities."""
    import tensorflow as tf
    from bench_serving import keras_hub_classifier

    from keras_bert.export.source import load_source

    source = load_source(model_dir)
    preprocessor, classifier = keras_hub_classifier(
        source.model, list(source.tokenizer.vocabulary), lower_case, seq_length
    )
    hub = tf.function(lambda x: tf.nn.softmax(classifier(preprocessor(x), training=False)))

    def call(rows):
        columns = tuple(tf.constant(list(c)) for c in zip(*rows))
        return hub(columns[0] if len(columns) == 1 else columns).numpy()

    return call


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def interleaved(calls, batches, rounds):
    """name -> per-round seconds over `batches`, each batch given to every call in turn; and
    name -> the probabilities of the last round [N, C]."""
    totals = {name: [] for name in calls}
    answers = {}
    for _ in range(rounds):
        spent = dict.fromkeys(calls, 0.0)
        outputs = {name: [] for name in calls}
        for batch in batches:
            for name, fn in calls.items():
                start = time.perf_counter()
                outputs[name].append(fn(batch))
                spent[name] += time.perf_counter() - start
        for name in calls:
            totals[name].append(spent[name])
            answers[name] = np.concatenate(outputs[name])
    return totals, answers


def worker(spec):
    """(In the thread count's process.) Times every peer at every batch size; writes JSON."""
    import tensorflow as tf

    threads = spec["threads"]
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rows = [tuple(r) for r in spec["rows"]]
    calls = peers(
        spec["paths"],
        spec["hf_dir"],
        threads,
        spec["seq_length"],
        spec["lower_case"],
        spec["ort_spinning"],
        spec.get("keras_hub_model"),
    )
    results = {}
    for size in spec["batch_sizes"]:
        chosen = {n: f for n, f in calls.items() if size == 1 or not n.startswith("tflite")}
        part = rows if size > 1 else rows[: spec["texts"]]
        batches = [part[i : i + size] for i in range(0, len(part), size)]
        for batch in batches[:2]:  # Warm-up: traces, oneDNN primitives, ORT's first run.
            for fn in chosen.values():
                fn(batch)
        totals, answers = interleaved(chosen, batches, spec["rounds"])
        results[size] = summarize(totals, answers, len(part))
    with open(spec["out"], "w") as f:
        json.dump(results, f)


def summarize(totals, answers, rows):
    """Per peer: ms per row (median, min, max over rounds), ratio to BASE, labels kept."""
    want = answers["savedmodel_fp32"]
    decided = want.max(-1) >= DECIDED
    summary = {}
    for name, seconds in totals.items():
        kept = answers[name].argmax(-1) == want.argmax(-1)
        summary[name] = {
            "ms_per_row": 1000 * statistics.median(seconds) / rows,
            "spread_ms": [1000 * min(seconds) / rows, 1000 * max(seconds) / rows],
            "vs_ort_int8": statistics.median(
                b / s for b, s in zip(totals.get(BASE, seconds), seconds)
            ),
            "vs_ort_fp32": statistics.median(
                b / s for b, s in zip(totals.get("ort_fp32", seconds), seconds)
            ),
            "labels_kept": float(kept.mean()),
            "decided_kept": float(kept[decided].mean()),
            "decided": int(decided.sum()),
            "rows": rows,
        }
    return summary


COLUMNS = (
    "threads, batch",
    "peer",
    "ms/row (median)",
    "spread",
    "x ORT int8",
    "x ORT float32",
    "labels kept",
    "of the decided",
)


def results_table(report):
    """Every thread count's and batch size's rows in one table (`common.format_table`: kept for
    the results file that `common.run_and_record` writes), as the results page shows it."""
    rows = []
    for threads, results in report["results"].items():
        for size, summary in results.items():
            for name, row in summary.items():
                low, high = row["spread_ms"]
                rows.append(
                    [
                        f"{threads}, {size}",
                        name,
                        f"{row['ms_per_row']:.2f}",
                        f"{low:.2f}-{high:.2f}",
                        f"{row['vs_ort_int8']:.2f}",
                        f"{row['vs_ort_fp32']:.2f}",
                        f"{row['labels_kept']:.2%}",
                        f"{row['decided_kept']:.2%} of {row['decided']}",
                    ]
                )
    return common.format_table(COLUMNS, rows)


def print_table(threads, size, summary):
    print(f"\nbatch {size}, {threads} thread(s), {next(iter(summary.values()))['rows']} rows")
    header = f"{'ms/row':>8} {'spread':>15} {'x ort_int8':>10} {'labels kept':>12} {'decided':>9}"
    print(f"{'':22} {header}")
    for name, row in summary.items():
        low, high = row["spread_ms"]
        print(
            f"{name:22} {row['ms_per_row']:8.2f} {low:7.2f}-{high:<7.2f} "
            f"{row['vs_ort_int8']:10.2f} {row['labels_kept']:12.2%} {row['decided_kept']:9.2%}"
        )


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    common.add_classifier_args(parser)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch_sizes", default="1,32")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", type=int, default=100, help="Rows timed at batch 1.")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--tflite", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--ort_spinning",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ONNX Runtime's idle threads spin (its default); --no-ort_spinning on a busy machine.",
    )
    parser.add_argument(
        "--keras_hub",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Also time keras-hub's pipeline (BertTextClassifierPreprocessor, padding to "
        "--seq_length, and BertTextClassifier, our weights).",
    )
    parser.add_argument("--work", help="Reuse the exports of an earlier run's directory.")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.worker:
        common.require_model(args.model_dir)
        common.require_data(args.data, "--data")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        with open(args.worker) as f:
            worker(json.load(f))
        return
    with open(os.path.join(args.model_dir, "task.json")) as f:
        lower_case = json.load(f)["lower_case"]
    if args.work:
        work = args.work
        with open(os.path.join(work, "paths.json")) as f:
            paths, hf_dir = json.load(f)
    else:
        work = tempfile.mkdtemp(prefix="bench_serving_int8_")
        paths, hf_dir = export_all(args.model_dir, work, args.seq_length, args.tflite)
        with open(os.path.join(work, "paths.json"), "w") as f:
            json.dump([paths, hf_dir], f)
    report = {"model_dir": args.model_dir, "data": args.data, "results": {}}
    for threads in map(int, args.threads.split(",")):
        spec = dict(
            threads=threads,
            rows=read_rows(args.data),
            paths=paths,
            hf_dir=hf_dir,
            seq_length=args.seq_length,
            lower_case=lower_case,
            batch_sizes=[int(b) for b in args.batch_sizes.split(",")],
            rounds=args.rounds,
            texts=args.texts,
            ort_spinning=args.ort_spinning,
            keras_hub_model=args.model_dir if args.keras_hub else None,
            out=os.path.join(work, f"threads_{threads}.json"),
        )
        spec_path = os.path.join(work, f"spec_{threads}.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        subprocess.run([sys.executable, __file__, f"--worker={spec_path}"], check=True)
        with open(spec["out"]) as f:
            results = json.load(f)
        for size, summary in results.items():
            print_table(threads, size, summary)
        report["results"][threads] = results
    print(results_table(report))
    return report


if __name__ == "__main__":
    if any(a.startswith("--worker") for a in sys.argv[1:]):
        main()  # A thread count's process: its numbers go back to the parent's file.
    else:
        common.run_and_record(main, __file__)
