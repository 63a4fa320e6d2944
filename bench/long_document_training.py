"""Training on long documents whose label is one sentence past the first window: truncation,
per-window training and document-level training (each pooling), accuracy and cost per document.

The data is bench/long_documents.py's `--kind=sentence` (one real SST-2 sentence among real
CoNLL-2003 news, past the first window), or `--kind=paragraph` (the key paragraph among SQuAD
paragraphs), made from the real data folder's files (`--sst2`, `--conll`, `--squad`). Each variant
is one `run_finetuning` of the real all-MiniLM-L6-v2 (same seed, learning rate, epochs, `batch_size`
windows per batch), run one after the other in this process:

- truncate: the first `seq_length` tokens of each document;
- window: `--long_text=windows --window_training=window` (each window trained with its
  document's label, the windows' logits pooled by mean at evaluation);
- document-<pooling>: `--window_training=document --window_pooling=<pooling>`;
- a suffix `:cls` or `:mean` sets `--token_pooling` (the classifier's vector of a window: its
  `pooled_output` or the mean of its tokens; without it, the runner's default: "mean" with
  windows, "cls" for truncate and the sentences alone).

Reported per variant: dev accuracy (documents), training seconds per document and epoch (the
runner's timed training loops, tracing included) and prediction ms per document
(`finetuning.predict` on the dev set, timed after a warm-up pass, median of `--repeat`). With
`--check_export`, the windows models' SavedModel (`serving_default`) accuracy on dev
against the runner's. A `--results` JSON file keeps every finished variant: a later call
skips them (variants may be run one at a time). `--retime_predict` times the prediction of
the finished `--variants` again from their saved models, training nothing: all of them loaded in
this process and timed in `--repeat` interleaved rounds (each round times every variant once, in a
rotated order) on the first `--retime_docs` dev documents, kept as the median and the spread
(min, max) of the rounds. Single passes here vary by up to 1.7x from one to the next, so rows
timed one after the other cannot be compared closer than that.

    .venv/bin/python bench/long_document_training.py --out out/ldt \\
        [--kind sentence] [--variants truncate,window,document-mean,document-max,document-attention]
        [--seq_length 128] [--epochs 2] [--learning_rate 5e-5] [--doc_stride 96] [--check_export]
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import long_documents  # noqa: E402
import numpy as np  # noqa: E402

VARIANTS = (
    "sentences",
    "truncate",
    "window",
    "document-mean",
    "document-max",
    "document-logsumexp",
    "document-attention",
)


def options(variant, doc_stride, max_windows):
    """The task options of a variant (see the module docstring)."""
    variant, _, token_pooling = variant.partition(":")
    pooling = {"token_pooling": token_pooling} if token_pooling else {}
    if variant in ("sentences", "truncate"):
        return pooling
    windows = {"long_text": "windows", "doc_stride": doc_stride, "max_windows": max_windows}
    windows.update(pooling)
    if variant == "window":
        return dict(windows, window_training="window", window_pooling="mean")
    return dict(windows, window_training="document", window_pooling=variant.split("-")[1])


def run_variant(args, variant, data_dir):
    """One fine-tuning run; returns its results dict."""
    from keras_bert.tasks import finetuning

    data_dir = variant_data(data_dir, variant)
    summary = finetuning.run_finetuning(
        task="text_classification",
        data_dir=data_dir,
        init_checkpoint=common.require_minilm(),
        model_dir=os.path.join(args.out, variant.replace(":", "_")),
        do_train=True,
        do_eval=True,
        seq_length=args.seq_length,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        optimizer=args.optimizer,
        num_train_epochs=args.epochs,
        seed=args.seed,
        task_options=options(variant, args.doc_stride, args.max_windows),
        verbose=args.verbose,
        plot=False,
    )
    train_docs = _count(os.path.join(data_dir, "train.tsv"))
    seconds = sum(h["seconds"] for h in summary["history"])
    result = {
        "accuracy": summary["eval"]["accuracy"],
        "train_s_per_doc_epoch": seconds / (train_docs * args.epochs),
        "epoch_accuracy": [e["accuracy"] for e in summary["eval_history"]],
        "steps": summary["steps"],
        "model_path": summary["model_path"],
    }
    cost, runner = predict_cost(args, summary["model_path"], data_dir)
    result.update(cost)
    if args.check_export and variant.partition(":")[0] not in ("sentences", "truncate"):
        result.update(export_check(args, summary["model_path"], data_dir, variant, runner))
    return result


def variant_data(data_dir, variant):
    """The data folder of a variant: the sentences alone (the ceiling, no news around them) have
    their own."""
    sentences = variant.partition(":")[0] == "sentences"
    return os.path.join(data_dir, "sentences") if sentences else data_dir


def _count(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip()) - 1


def _dev(data_dir):
    with open(os.path.join(data_dir, "dev.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [r[0] for r in rows], [r[1] for r in rows]


def _runner_labels(model_dir, texts):
    """A call that returns the runner's labels of `texts` (its features, `finetuning.predict`, the
    task's pooling); the model is loaded once, so repeated calls time prediction alone."""
    from keras_bert.checkpoints.task_model import load_task_model
    from keras_bert.tasks import finetuning, registry
    from keras_bert.tasks.text_classification.task import TextExample
    from keras_bert.text.tokenizer import BertTokenizer

    model, info, vocab = load_task_model(model_dir)
    names = ("long_text", "doc_stride", "max_windows", "window_pooling", "window_training")
    names += ("token_pooling",)
    task = registry.get_task("text_classification", {k: info[k] for k in names if k in info})
    task.labels, task.pair = info["labels"], False
    examples = [TextExample(f"dev-{i}", t, None) for i, t in enumerate(texts)]
    tokenizer = BertTokenizer(vocab, lower_case=info["lower_case"])

    def labels():
        feats = task.encode(examples, tokenizer, info["seq_length"])
        return task.predictions(examples, feats, finetuning.predict(model, task, feats, 32))

    return labels


def retime(args, results, variants, data_dir):
    """Each finished variant's prediction ms per document, timed again in interleaved rounds (see
    the module docstring): `results` updated in place."""
    calls, docs = {}, {}
    for variant in variants:
        _, texts = _dev(variant_data(data_dir, variant))
        texts = texts[: args.retime_docs]
        calls[variant] = _runner_labels(results[variant]["model_path"], texts)
        calls[variant]()  # Traces.
        docs[variant] = len(texts)
    for variant, seconds in common.rotated_rounds(calls, args.repeat).items():
        ms = [1e3 * s / docs[variant] for s in seconds]
        results[variant].update(
            predict_ms_per_doc=float(np.median(ms)),
            predict_ms_spread=[min(ms), max(ms)],
            predict_rounds=len(ms),
            predict_docs=docs[variant],
            predict_retimed=True,
        )


def predict_cost(args, model_dir, data_dir):
    """Prediction ms per dev document (tokenizing, windowing, the model, pooling), and the runner's
    dev labels (the untimed first pass's: every pass computes the same)."""
    _, texts = _dev(data_dir)
    labels = _runner_labels(model_dir, texts)
    runner = labels()  # Traces.
    seconds = common.rotated_rounds({"runner": labels}, args.repeat)["runner"]
    return {"predict_ms_per_doc": 1e3 * float(np.median(seconds)) / len(texts)}, runner


def export_check(args, model_dir, data_dir, variant, want):
    """The SavedModel's dev accuracy and its agreement with `want`, the runner's dev labels."""
    import tensorflow as tf

    from keras_bert.export import export_saved_model

    gold, texts = _dev(data_dir)
    serving = tf.saved_model.load(
        export_saved_model(
            model_dir, os.path.join(args.out, variant.replace(":", "_") + "-serving")
        )
    ).signatures["serving_default"]
    got = [
        label.decode()
        for i in range(0, len(texts), 16)
        for label in serving(text=tf.constant(texts[i : i + 16]))["label"].numpy()
    ]
    return {
        "saved_model_accuracy": float(np.mean(np.array(got) == np.array(gold))),
        "runner_accuracy_check": float(np.mean(np.array(want) == np.array(gold))),
        "saved_model_agrees": float(np.mean(np.array(got) == np.array(want))),
    }


def main(argv=None):
    parser = common.argument_parser(__doc__.split("\n")[0])
    parser.add_argument(
        "--out", required=True, help="The folder of the data, the runs and results.json."
    )
    long_documents.add_source_args(parser, "sentence")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--train", type=int, default=1500)
    parser.add_argument("--dev", type=int, default=872)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument(
        "--data_seq_length", type=int, default=128, help="The window the key lies past."
    )
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--doc_stride", type=int, default=None)  # Half a window.
    parser.add_argument("--max_windows", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check_export", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--retime_predict",
        action="store_true",
        help="Time the prediction of the finished --variants again, interleaved; train nothing.",
    )
    parser.add_argument(
        "--retime_docs",
        type=int,
        default=None,
        help="With --retime_predict: time the first this many dev documents (default: all).",
    )
    args = parser.parse_args(argv)
    if args.verbose:  # The runner's log: loss and accuracy per loop and epoch.
        from absl import logging

        logging.set_verbosity(logging.INFO)
    model = common.require_minilm()
    data_dir = os.path.join(args.out, "data")
    if not os.path.exists(os.path.join(data_dir, "dev.tsv")):
        long_documents.require_sources(args)
        vocab = os.path.join(model, "vocab.txt")
        sizes = (args.data_seq_length, args.train, args.dev)
        if args.kind == "paragraph":
            long_documents.write_documents(args.squad, data_dir, vocab, *sizes)
        else:
            source = args.sst2 if args.kind == "sentence" else args.squad
            long_documents.write_sentence_documents(
                source, args.conll, data_dir, vocab, *sizes, kind=args.kind
            )
    path = os.path.join(args.out, "results.json")
    results = json.load(open(path)) if os.path.exists(path) else {}
    variants = args.variants.split(",")
    if args.retime_predict:
        retime(args, results, [v for v in variants if v in results], data_dir)
        _write(path, results)
    else:
        for variant in variants:
            if variant not in results:
                results[variant] = run_variant(args, variant, data_dir)
                _write(path, results)
    report(results)


def _write(path, results):
    """results.json, written atomically (an interrupted write keeps the finished variants)."""
    from keras_bert.io_utils import write_atomic

    write_atomic(path, json.dumps(results, indent=1))


def report(results):
    """The table, costs as ratios to per-window training."""
    base = results.get("window", results.get("window:mean"))
    rows = []
    for name, r in results.items():
        ratio = (
            f"{r['train_s_per_doc_epoch'] / base['train_s_per_doc_epoch']:.2f} / "
            f"{r['predict_ms_per_doc'] / base['predict_ms_per_doc']:.2f}"
            if base
            else "-"
        )
        rows.append(
            [
                name,
                f"{r['accuracy']:.3f}",
                f"{r['train_s_per_doc_epoch'] * 1e3:.0f}",
                f"{r['predict_ms_per_doc']:.1f}"
                + (
                    " ({:.1f}-{:.1f})".format(*r["predict_ms_spread"])
                    if "predict_ms_spread" in r
                    else ""
                ),
                ratio,
                f"{r['saved_model_accuracy']:.3f}" if "saved_model_accuracy" in r else "-",
            ]
        )
    headers = ["variant", "dev acc", "train ms/doc/epoch", "predict ms/doc"]
    headers += ["cost / window (train / predict)", "SavedModel acc"]
    print(common.format_table(headers, rows))


if __name__ == "__main__":
    main()
