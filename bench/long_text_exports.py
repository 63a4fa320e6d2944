"""A model fine-tuned with `--long_text=windows`: its SavedModel and float32 TFLite answers against
the runner's on real long documents, and a 1 MB text through both.

The runner's answers are the task's own path (`task.encode` windows, `finetuning.predict`, the
task's pooling); the exports' come from `serving_default` in batches of 8 documents.

    .venv/bin/python bench/long_text_exports.py --model_dir runs/docs/model --data docs/dev.tsv \\
        [--docs 200] [--export_dir out/long_text_exports]

The model and its data come from two commands (`--help` gives them): bench/long_documents.py
writes the documents, `keras-bert-finetune --long_text=windows` fine-tunes on them.
"""

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402

MEGABYTE = ("the lovely film was really quite good and " * 30000)[: 1 << 20]
OPTIONS = ("long_text", "doc_stride", "max_windows", "window_pooling")
# How to make the inputs (from the repository's root).
DATA_COMMAND = "python bench/long_documents.py --out docs"
MODEL_COMMAND = (
    "keras-bert-finetune --task=text_classification --data_dir=docs --init_checkpoint="
    f"{common.MINILM_PATH} --model_dir=runs/docs --do_train --do_eval --seq_length=128 "
    "--learning_rate=5e-5 --num_train_epochs=2 --long_text=windows --doc_stride=96 --max_windows=16"
)


def runner_logits(model_dir, texts):
    """The runner's document logits and windows per document."""
    from keras_bert.checkpoints.task_model import load_task_model
    from keras_bert.tasks import features as feature_lib
    from keras_bert.tasks import finetuning, registry
    from keras_bert.tasks.text_classification.task import TextExample

    model, info, vocab = load_task_model(model_dir)
    options = {k: info[k] for k in OPTIONS}
    options["window_training"] = info.get("window_training", "window")  # Older models: "window".
    task = registry.get_task("text_classification", options)
    task.labels, task.pair = info["labels"], False
    examples = [TextExample(f"dev-{i}", t, None) for i, t in enumerate(texts)]
    from keras_bert.text.tokenizer import BertTokenizer

    feats = task.encode(
        examples, BertTokenizer(vocab, lower_case=info["lower_case"]), info["seq_length"]
    )
    outputs = finetuning.predict(model, task, feats, 32)
    pooled = feature_lib.pool_windows(  # Document-level models' logits come pooled.
        outputs["logits"], feats.example_index, len(texts), info["window_pooling"]
    )
    return pooled, np.bincount(feats.example_index)


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n")[0])
    parser.add_argument(
        "--model_dir",
        required=True,
        help=f"A --long_text=windows text classifier's model/, e.g. runs/docs/model: {DATA_COMMAND}"
        f", then {MODEL_COMMAND}.",
    )
    parser.add_argument(
        "--data", required=True, help=f"A label<TAB>text file, e.g. docs/dev.tsv ({DATA_COMMAND})."
    )
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--export_dir", default=None, help="Default: a temporary folder.")
    args = parser.parse_args(argv)
    common.require(args.model_dir, "--model_dir", f"run {DATA_COMMAND}, then {MODEL_COMMAND}")
    common.require(args.data, "--data", f"run {DATA_COMMAND}")
    return args


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    from keras_bert.export import export_saved_model, tflite
    from keras_bert.export.source import load_source

    with open(os.path.join(args.model_dir, "task.json")) as f:
        assert json.load(f).get("long_text") == "windows", "not a --long_text=windows model"
    with open(args.data, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    texts = [r[1] for r in rows if r[:2] != ["label", "text"]][: args.docs]
    logits, counts = runner_logits(args.model_dir, texts)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    out_dir = args.export_dir or tempfile.mkdtemp()
    serving = tf.saved_model.load(
        export_saved_model(args.model_dir, os.path.join(out_dir, "saved_model"))
    ).signatures["serving_default"]
    lite_path = tflite.write_tflite(load_source(args.model_dir), os.path.join(out_dir, "tflite"))
    lite = tflite.load_interpreter(os.path.join(lite_path, tflite.MODEL_FILE))
    lite = lite.get_signature_runner("serving_default")
    calls = {
        "SavedModel": lambda b: {k: v.numpy() for k, v in serving(text=tf.constant(b)).items()},
        "TFLite float32": lambda b: lite(text=np.array([t.encode() for t in b], object)),
    }
    print(f"{len(texts)} documents, {counts.mean():.2f} windows each on average")
    for name, call in calls.items():
        outs = [call(texts[i : i + 8]) for i in range(0, len(texts), 8)]
        labels = np.concatenate([o["label_id"] for o in outs])
        difference = np.abs(np.concatenate([o["probabilities"] for o in outs]) - probabilities)
        windows = np.concatenate([o["num_windows"] for o in outs])
        print(
            f"{name}: the runner's label on {np.mean(labels == logits.argmax(-1)):.1%}, largest "
            f"probability difference {difference.max():.2g}, num_windows equal: "
            f"{windows.tolist() == counts.tolist()}"
        )
        started = time.perf_counter()
        big = call([MEGABYTE])
        print(
            f"{name}, a 1 MB text: label {big['label'].tolist()}, num_windows "
            f"{big['num_windows'].tolist()}, text_cut {big['text_cut'].tolist()}, "
            f"{time.perf_counter() - started:.1f} s"
        )


if __name__ == "__main__":
    sys.exit(common.run_and_record(main, __file__))
