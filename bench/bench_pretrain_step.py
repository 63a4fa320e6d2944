"""One pre-training step: keras_bert.BertPretrainer vs keras_hub.models.BertMaskedLM.

Forward + backward + AdamW update on the same random batch (sequence 128, 20 masked
positions), same optimizer settings, in graph mode (tf.function) and with XLA
(jit_compile=True). keras-hub's BertMaskedLM has no next-sentence head, so the
like-for-like row is ours with `next_sentence=False` (masked LM only); ours with the
paper's MLM + NSP objective is shown too. Default size "small" (L=4, H=512) at batch 8
keeps the run short; `--size base` gives BERT-base.

    .venv/bin/python bench/bench_pretrain_step.py [--size small] [--batch 8] [--seq 128]
        [--predictions 20] [--iters 3] [--repeat 1]
"""

import argparse
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import keras_bert  # noqa: E402
from keras_bert.models.pretrainer import pretraining_loss  # noqa: E402


def random_pretraining_batch(batch, seq, predictions, vocab_size, seed=0):
    """Encoder inputs plus masked positions and labels, as NumPy arrays.

    Returns:
        (inputs, labels): inputs adds `masked_lm_positions` [B, P] (distinct positions
        inside each row's real tokens) to `common.random_encoder_batch`; labels has
        `masked_lm_ids` [B, P], `masked_lm_weights` [B, P] and `next_sentence_labels` [B].
    """
    rng = np.random.default_rng(seed)
    inputs = common.random_encoder_batch(batch, seq, vocab_size, seed=seed)
    lengths = inputs["input_mask"].sum(axis=1)
    positions = np.stack(
        [np.sort(rng.choice(np.arange(1, n), size=predictions, replace=False)) for n in lengths]
    ).astype(np.int32)
    inputs["masked_lm_positions"] = positions
    labels = {
        "masked_lm_ids": np.take_along_axis(inputs["input_word_ids"], positions, axis=1),
        "masked_lm_weights": np.ones((batch, predictions), np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=batch).astype(np.int32),
    }
    return inputs, labels


def build_ours(config, next_sentence):
    """keras_bert.BertPretrainer -> (model, fn(inputs) -> outputs, loss(labels, outputs))."""
    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(config), next_sentence=next_sentence)
    return (
        model,
        lambda inputs: model(inputs, training=True),
        lambda y, out: pretraining_loss(y, out)["loss"],
    )


def build_keras_hub(config):
    """keras_hub.models.BertMaskedLM on a BertBackbone of the same size (MLM only)."""
    import keras_hub

    model = keras_hub.models.BertMaskedLM(common.keras_hub_backbone(config), preprocessor=None)

    def fn(inputs):
        return model(
            {**common.keras_hub_inputs(inputs), "mask_positions": inputs["masked_lm_positions"]},
            training=True,
        )

    def loss(labels, logits):
        return pretraining_loss(labels, {"mlm_logits": logits})["mlm_loss"]

    return model, fn, loss


PEERS = {
    "ours MLM+NSP": lambda config: build_ours(config, next_sentence=True),
    "ours MLM": lambda config: build_ours(config, next_sentence=False),
    "keras-hub MLM": build_keras_hub,
}


def optimizer():
    """The paper's AdamW settings (as in the original code), the same for every model."""
    return keras.optimizers.AdamW(
        learning_rate=1e-4,
        weight_decay=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        global_clipnorm=1.0,
    )


def train_step_fn(model, forward, loss_fn, jit):
    """A compiled step: loss, gradients of all trainable weights, AdamW update."""
    variables = model.trainable_variables
    opt = optimizer()
    opt.build(variables)

    @tf.function(jit_compile=jit)
    def step(inputs, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, forward(inputs))
        grads = tape.gradient(loss, variables)
        opt.apply(grads, variables)
        return loss

    return step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.add_size_args(parser, size="small")
    parser.add_argument(
        "--predictions", type=int, default=20, help="Masked positions per sequence."
    )
    args = parser.parse_args(argv)
    # The pooler has no gradient without NSP (ours MLM-only, keras-hub): expected.
    warnings.filterwarnings("ignore", message="Gradients do not exist")

    config = keras_bert.BertConfig.preset(args.size)
    print(
        f"BERT {args.size}: L={config.num_hidden_layers} H={config.hidden_size} "
        f"V={config.vocab_size}, batch {args.batch} x seq {args.seq}, {args.predictions} masked "
        f"positions, AdamW, float32; TF {tf.__version__}, keras {keras.__version__}, "
        f"{os.cpu_count()} CPUs"
    )
    inputs, labels = random_pretraining_batch(
        args.batch, args.seq, args.predictions, config.vocab_size
    )
    inputs = {k: tf.constant(v) for k, v in inputs.items()}
    labels = {k: tf.constant(v) for k, v in labels.items()}

    steps = {}
    for name, build in PEERS.items():
        keras.utils.set_random_seed(0)
        model, forward, loss_fn = build(config)
        for mode, jit in common.MODES.items():
            step = train_step_fn(model, forward, loss_fn, jit)
            step(inputs, labels)  # Trace (and XLA-compile) once, untimed.
            steps[name, mode] = step

    rounds = {key: [] for key in steps}
    for round_index in range(args.repeat):
        for (name, mode), step in steps.items():
            t = common.time_call(lambda step=step: step(inputs, labels), warmup=1, iters=args.iters)
            rounds[name, mode].append(t)
            print(
                f"  round {round_index + 1}: {name:14s} {mode:5s} {t['median'] * 1e3:8.1f} ms/step "
                f"(min {t['min'] * 1e3:.1f}, max {t['max'] * 1e3:.1f}, cpu {t['cpu'] * 1e3:.1f})",
                flush=True,
            )

    table = []
    for (name, mode), ts in rounds.items():
        times = [x for t in ts for x in t["times"]]
        median = float(np.median(times))
        table.append(
            [
                name,
                mode,
                median * 1e3,
                float(np.median([t["cpu"] for t in ts])) * 1e3,
                1 / median,
                f"{(max(times) - min(times)) / median:.0%}",
            ]
        )
    print()
    print(common.format_table(["model", "mode", "ms/step", "cpu ms", "steps/s", "spread"], table))
    print()
    for mode in common.MODES:
        ours, hub = rounds["ours MLM", mode], rounds["keras-hub MLM", mode]
        wall = [h["median"] / o["median"] for h, o in zip(hub, ours)]
        cpu = [h["cpu"] / o["cpu"] for h, o in zip(hub, ours)]
        print(
            f"speed ours/keras-hub (MLM only) {mode:5s}: {np.median(wall):.2f}x wall "
            f"(rounds {' '.join(f'{w:.2f}' for w in wall)}), {np.median(cpu):.2f}x cpu time "
            f"(rounds {' '.join(f'{c:.2f}' for c in cpu)})"
        )


if __name__ == "__main__":
    common.run_and_record(main, __file__)
