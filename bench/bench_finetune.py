"""Fine-tuning on SST-2 dev lengths: bucketed per-batch padding vs padding to 128; one step vs
keras-hub.

The data are the 872 real SST-2 dev sentences, tokenized with the real uncased vocabulary
(`keras_bert.tasks.glue.task` encoding, as the fine-tuning runner does), both from the real data
folder by default (`--data_dir`, `--vocab`). The model is a
`BertClassifier` with random weights ("small", L-4_H-512, vocab 30522 by default).

1. Eval: `keras_bert.tasks.finetuning.predict` (batches sorted by length, each padded to its own
   longest sequence) against the same call padding every example to `--seq` (`buckets=[seq]`,
   as a fixed-length preprocessor does), same weights, same batches; the predictions must agree.
   A "model only" row times the same batches built beforehand through one traced function
   (no input pipeline, no tracing), to separate the model's share from `predict`'s.
2. Train: one epoch of the runner's `fit` of the task model over the same sentences (the runner's
   shuffled, length-bucketed batch plan), per-batch padding against every batch padded to `--seq`.
3. Step: one fine-tuning step (forward, backward, optimizer update; Keras `train_on_batch`) of
   ours (`BertClassifier`, compiled as the runner compiles it) against
   `keras_hub.models.BertTextClassifier` on a
   `BertBackbone` of the same size, on the same batch padded to `--seq` (equal work) and padded
   to its own longest sequence, in graph mode and with XLA. Every model gets the runner's
   optimizer (the original AdamWeightDecay, lr 2e-5, clipping 1.0).

Timed calls are interleaved over `--repeat` rounds; tables give medians over all timed calls with
min/max spread, ratios are medians of per-round ratios, in wall and in CPU time.

    .venv/bin/python bench/bench_finetune.py [--size small] [--batch 32] [--seq 128] [--iters 2]
        [--train_iters 1] [--repeat 1] [--data_dir ../shared/data/sst2]
        [--vocab ../shared/data/bert_uncased/vocab.txt] [--no-xla]
        [--plot bench/out/finetune.png]
"""

import dataclasses
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402

from keras_bert.inputs import INPUT_NAMES  # noqa: E402
from keras_bert.tasks.config import RECIPE, FinetuneConfig  # noqa: E402

# The runner's defaults (optimizer, weight decay, clipping, dropout) and the GLUE recipe.
RUNNER = {f.name: f.default for f in dataclasses.fields(FinetuneConfig)}
LEARNING_RATE = RECIPE["learning_rate"]
# Logit agreement asked of the two paddings (float32, masked attention: round-off only).
LOGIT_ATOL = 1e-4


# === Data ===


def load_sst2(data_dir, vocab_file, seq):
    """The SST-2 dev split encoded as the runner does -> (task, FeatureSet, vocabulary size)."""
    from keras_bert.tasks import registry
    from keras_bert.tasks.glue import data as glue
    from keras_bert.text.tokenizer import BertTokenizer
    from keras_bert.text.vocab import load_vocabulary

    task = registry.get_task("sst2")
    vocabulary = load_vocabulary(vocab_file)
    examples = glue.read_examples("sst2", data_dir, "dev")
    feats = task.encode(examples, BertTokenizer(vocabulary, lower_case=True), seq)
    return task, feats, len(vocabulary)


def plans(lengths, batch, seq):
    """Batch plans (batches, padded lengths) of every padding scheme, for the efficiency table."""
    from keras_bert.tasks import features as feature_lib

    unsorted = [np.arange(i, min(i + batch, len(lengths))) for i in range(0, len(lengths), batch)]
    xla_buckets = [b for b in feature_lib.DEFAULT_BUCKETS if b < seq] + [
        seq
    ]  # The runner's under XLA.
    return {
        "eval: sorted, per-batch padding": feature_lib.batch_plan(lengths, batch),
        (
            f"eval: sorted, fixed buckets {','.join(map(str, xla_buckets))} (XLA)"
        ): feature_lib.batch_plan(lengths, batch, buckets=xla_buckets),
        "train: runner's plan, per-batch padding": feature_lib.batch_plan(
            lengths, batch, shuffle=True
        ),
        "file order, per-batch padding (no bucketing)": (
            unsorted,
            np.array([lengths[b].max() for b in unsorted]),
        ),
        f"every example padded to {seq}": feature_lib.batch_plan(lengths, batch, buckets=[seq]),
    }


def efficiency_rows(lengths, batch, seq):
    """Rows of the padding table: scheme, batches, real tokens, padded tokens, real / padded."""
    rows = []
    for name, (batches, padded) in plans(lengths, batch, seq).items():
        real = int(sum(lengths[b].sum() for b in batches))
        total = int(sum(len(b) * s for b, s in zip(batches, padded)))
        rows.append([name, len(batches), real, total, f"{real / total:.0%}"])
    return rows


def dense_batches(feats, batches, padded, task=None):
    """The planned batches as a list of (inputs, labels) of tensors: labels by the task model's
    output name (`TaskDefinition.targets`, the runner's), none without a task."""
    from keras_bert.tasks import features as feature_lib

    labels = dict(label_keys=task.label_keys, targets=task.targets) if task else {"label_keys": ()}
    return list(feature_lib.make_dataset(feats, batches, padded, **labels))


# === Models ===


def make_optimizer(variables, steps):
    """The fine-tuning runner's optimizer with the GLUE learning rate, the same for every model."""
    from keras_bert.training import optimizers

    return optimizers.create_optimizer(
        LEARNING_RATE,
        steps,
        int(steps * RUNNER["warmup_proportion"]),
        variables=variables,
        optimizer=RUNNER["optimizer"],
        weight_decay=RUNNER["weight_decay"],
        clip_norm=RUNNER["clip_norm"],
    )


def build_ours(task, config):
    """keras_bert BertClassifier (the task's model) with seeded random weights."""
    import keras

    import keras_bert

    keras.utils.set_random_seed(0)
    return task.build_model(keras_bert.BertEncoder(config), RUNNER["dropout"])


def ours_trainer(task, model, steps, jit):
    """The task model compiled as the runner compiles it: its own loss and metrics, the runner's
    optimizer."""
    del task  # The model carries its loss.
    model.compile(optimizer=make_optimizer(model.trainable_variables, steps), jit_compile=jit)
    return model


def hub_trainer(config, num_classes, steps, jit):
    """keras_hub BertTextClassifier on a BertBackbone of the same size, compiled like ours
    (its default sparse cross-entropy from logits, and accuracy as ours)."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    model = keras_hub.models.BertTextClassifier(
        common.keras_hub_backbone(config), num_classes, preprocessor=None, dropout=RUNNER["dropout"]
    )
    model.compile(
        optimizer=make_optimizer(model.trainable_variables, steps),
        metrics=["sparse_categorical_accuracy"],
        jit_compile=jit,
    )
    return model


# === Cases: name -> a call timed as one unit of `examples` examples ===


def eval_cases(model, task, feats, batch, seq):
    """`predict` and the model alone on pre-built batches, per-batch padding vs padded to `seq`.

    Returns:
        (cases, logits): cases a dict name -> case; logits the `predict` logits [N, 2] per scheme.
    """
    import tensorflow as tf

    from keras_bert.tasks import features as feature_lib
    from keras_bert.tasks import finetuning

    spec = [{k: tf.TensorSpec([None, None], tf.int32, name=k) for k in INPUT_NAMES}]
    forward = tf.function(lambda x: model(x, training=False)["logits"], input_signature=spec)
    n = feats.num_features
    cases, logits = {}, {}
    for scheme, buckets in (("bucketed", None), (f"pad {seq}", [seq])):

        def predict(buckets=buckets):
            return finetuning.predict(model, task, feats, batch, buckets)["logits"]

        logits[scheme] = predict()
        inputs = [
            x
            for x, _ in dense_batches(
                feats, *feature_lib.batch_plan(feats.lengths, batch, buckets=buckets)
            )
        ]
        forward(inputs[0])  # Trace once, untimed.
        cases[f"eval predict, {scheme}"] = _case(
            "eval", predict, n, warmup=0
        )  # Each call traces anew.
        cases[f"eval model only, {scheme}"] = _case(
            "eval", lambda inputs=inputs: [forward(x) for x in inputs], n, warmup=0
        )
    return cases, logits


def train_cases(task, model, feats, batch, seq):
    """One epoch of the runner's `fit` on its plan, per-batch padding vs padded to `seq`."""
    from keras_bert.tasks import features as feature_lib

    lengths = feats.lengths
    trainer = ours_trainer(
        task, model, steps=10 * len(feature_lib.batch_plan(lengths, batch)[0]), jit=False
    )
    cases = {}
    for scheme, buckets in (("bucketed", None), (f"pad {seq}", [seq])):
        batches, padded = feature_lib.batch_plan(lengths, batch, shuffle=True, buckets=buckets)
        data = feature_lib.make_dataset(
            feats, batches, padded, label_keys=task.label_keys, targets=task.targets
        )
        trainer.fit(data.take(2), epochs=1, verbose=0, shuffle=False)  # Trace once, untimed.
        cases[f"train epoch, {scheme}"] = _case(
            "train",
            lambda data=data: trainer.fit(data, epochs=1, verbose=0, shuffle=False).history["loss"],
            feats.num_features,
            warmup=0,
            steps=len(batches),
        )
    return cases


def step_batch(feats, batch):
    """The runner's training batch of median padded length -> (index, its length)."""
    from keras_bert.tasks import features as feature_lib

    batches, padded = feature_lib.batch_plan(feats.lengths, batch, shuffle=True)
    pick = np.argsort(padded, kind="stable")[len(padded) // 2]
    return batches[pick], int(padded[pick])


def step_cases(task, model, config, feats, batch, seq, modes):
    """`train_on_batch` of ours and keras-hub on one batch padded to `seq` and to its longest."""
    from keras_bert.testing.keras_hub_weights import keras_hub_inputs

    index, length = step_batch(feats, batch)
    cases = {}
    for mode in modes:
        jit = common.MODES[mode]
        trainers = {
            "ours": ours_trainer(task, model, steps=1000, jit=jit),
            "keras-hub": hub_trainer(config, model.num_classes, steps=1000, jit=jit),
        }
        for padded in (seq, length):
            ((x, y),) = dense_batches(feats, [index], [padded], task)
            scheme = f"pad {seq}" if padded == seq else f"bucketed ({length})"
            for peer, trainer in trainers.items():
                args = (x, y) if peer == "ours" else (keras_hub_inputs(x), y["logits"])
                call = lambda trainer=trainer, args=args: trainer.train_on_batch(*args)  # noqa: E731
                call()  # Trace (and XLA-compile) once, untimed.
                cases[f"step {peer} {mode}, {scheme}"] = _case(
                    "step", call, batch, warmup=1, steps=1
                )
    return cases, length


def _case(section, call, examples, warmup, steps=None):
    """A timed call: `examples` examples in `steps` update steps (None: no training)."""
    return {
        "section": section,
        "call": call,
        "examples": examples,
        "warmup": warmup,
        "steps": steps,
        "rounds": [],
    }


# === Timing and report ===


def run_rounds(cases, iters, train_iters, repeat):
    """Times every case per round, cases interleaved, for `repeat` rounds."""
    for round_index in range(repeat):
        for name, case in cases.items():
            t = common.time_call(
                case["call"],
                warmup=case["warmup"],
                iters=train_iters if case["section"] == "train" else iters,
            )
            case["rounds"].append(t)
            print(
                f"  round {round_index + 1}: {name:34s} {t['median'] * 1e3:9.1f} ms (min "
                f"{t['min'] * 1e3:.1f}, max {t['max'] * 1e3:.1f}, cpu {t['cpu'] * 1e3:.1f})",
                flush=True,
            )


def result_rows(cases):
    """Per case: name, ms per unit, cpu ms, ms/step, examples/s, spread (min-max over median)."""
    rows = []
    for name, case in cases.items():
        s = common.summarize_rounds(case["rounds"])
        per_step = s["median"] / case["steps"] * 1e3 if case["steps"] else ""
        rows.append(
            [
                name,
                s["median"] * 1e3,
                s["cpu"] * 1e3,
                per_step,
                case["examples"] / s["median"],
                f"{(s['max'] - s['min']) / s['median']:.0%}",
            ]
        )
    return rows


def ratio_pairs(seq, length):
    """(label, faster case, slower case) of every ratio printed."""
    pad, bucketed = f"pad {seq}", f"bucketed ({length})"
    pairs = [
        (f"{kind}: bucketed vs {pad}", f"{kind}, bucketed", f"{kind}, {pad}")
        for kind in ("eval predict", "eval model only", "train epoch")
    ]
    for mode in common.MODES:
        pairs += [
            (
                f"step {mode}, same {scheme} batch: ours vs keras-hub",
                f"step ours {mode}, {scheme}",
                f"step keras-hub {mode}, {scheme}",
            )
            for scheme in (pad, bucketed)
        ]
        pairs.append(
            (
                f"step {mode}: ours {bucketed} vs keras-hub {pad}",
                f"step ours {mode}, {bucketed}",
                f"step keras-hub {mode}, {pad}",
            )
        )
    return pairs


def print_ratios(cases, seq, length):
    for label, fast, slow in ratio_pairs(seq, length):
        if fast in cases and slow in cases:
            print(
                f"{label + ':':58s} "
                + common.ratio_text(cases[slow]["rounds"], cases[fast]["rounds"])
            )


def plot(path, cases, title):
    labels = list(cases)
    summaries = [common.summarize_rounds(c["rounds"]) for c in cases.values()]
    series = {
        "per wall second": [c["examples"] / s["median"] for c, s in zip(cases.values(), summaries)],
        "per CPU second x cores": [
            c["examples"] / (s["cpu"] / os.cpu_count()) for c, s in zip(cases.values(), summaries)
        ],
    }
    common.save_bar_chart(path, labels, series, "examples/s", title)


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    common.add_size_args(parser, size="small")
    parser.set_defaults(batch=RECIPE["batch_size"], seq=RECIPE["seq_length"], iters=2)
    parser.add_argument(
        "--train_iters", type=int, default=1, help="Timed training epochs per scheme and round."
    )
    parser.add_argument(
        "--data_dir",
        default=common.data_file("sst2"),
        help=common.data_help("SST-2's folder with dev.tsv"),
    )
    parser.add_argument(
        "--vocab",
        default=common.data_file("bert_uncased", "vocab.txt"),
        help=common.data_help("The uncased BERT vocab.txt"),
    )
    parser.add_argument("--no-xla", action="store_true", help="Skip the XLA step rows.")
    parser.add_argument(
        "--plot", default="bench/out/finetune.png", help="PNG bar chart path ('' for none)."
    )
    args = parser.parse_args(argv)
    common.require_data(os.path.join(args.data_dir, "dev.tsv"), "--data_dir")
    common.require_data(args.vocab, "--vocab")
    return args


def main(argv=None):
    args = parse_args(argv)
    import keras
    import tensorflow as tf

    import keras_bert

    # The step rows trace each batch shape once, untimed: TensorFlow's retracing notes are expected.
    tf.get_logger().setLevel("ERROR")

    task, feats, vocab_size = load_sst2(args.data_dir, args.vocab, args.seq)
    config = keras_bert.BertConfig.preset(args.size, vocab_size=vocab_size)
    lengths = feats.lengths
    print(
        f"SST-2 dev: {feats.num_features} sentences, tokens per sentence min {lengths.min()} "
        f"median {int(np.median(lengths))} mean {lengths.mean():.1f} max {lengths.max()} (cut at "
        f"{args.seq}); BERT {args.size}: L={config.num_hidden_layers} H={config.hidden_size} "
        f"V={config.vocab_size}, batch {args.batch}, float32; TF {tf.__version__}, keras "
        f"{keras.__version__}, {os.cpu_count()} CPUs"
    )
    print()
    print(
        common.format_table(
            ["padding scheme", "batches", "real tokens", "padded tokens", "efficiency"],
            efficiency_rows(lengths, args.batch, args.seq),
        )
    )
    print()

    model = build_ours(task, config)
    cases, logits = eval_cases(model, task, feats, args.batch, args.seq)
    scheme_128 = f"pad {args.seq}"
    diff = np.abs(logits["bucketed"] - logits[scheme_128])
    same_labels = np.array_equal(logits["bucketed"].argmax(-1), logits[scheme_128].argmax(-1))
    print(
        f"predictions, bucketed vs {scheme_128}: argmax equal {same_labels}, max abs logit "
        f"difference {diff.max():.2g}"
    )
    if not same_labels or diff.max() > LOGIT_ATOL:
        sys.exit(
            f"bench_finetune: the two paddings disagree (max abs logit difference {diff.max():.3g} "
            f"> {LOGIT_ATOL} or argmax differs)."
        )
    cases.update(train_cases(task, model, feats, args.batch, args.seq))
    modes = ["graph"] if args.no_xla else list(common.MODES)
    step, length = step_cases(task, model, config, feats, args.batch, args.seq, modes)
    cases.update(step)

    run_rounds(cases, args.iters, args.train_iters, args.repeat)
    print()
    print(
        f"eval and train: {feats.num_features} examples per call; step: one batch of {args.batch}"
    )
    print(
        common.format_table(
            ["case", "ms/call", "cpu ms", "ms/step", "examples/s", "spread"], result_rows(cases)
        )
    )
    print()
    print_ratios(cases, args.seq, length)
    if args.plot:
        plot(
            args.plot,
            cases,
            f"BERT-{args.size} fine-tuning on SST-2 dev lengths, batch {args.batch}, CPU",
        )
        print(f"chart: {args.plot}")


if __name__ == "__main__":
    common.run_and_record(main, __file__)
