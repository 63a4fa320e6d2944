"""LoRA vs full fine-tuning: trainable parameters, training-step time and peak memory.

The same task model (`BertClassifier` on a random-weight `BertEncoder` of `--size`), the same
random padded batch and the same optimizer (`create_optimizer`'s AdamWeightDecay, as the
runner) train one step at a time; only what trains differs: every weight (full fine-tuning) or
LoRA of `--rank` on the attention and feed-forward kernels plus the head
(`keras_bert.models.lora`). Each mode runs in its own process, the modes alternating over
`--repeat` rounds, so that peak memory (the process's maximum resident set) is its own.

    .venv/bin/python bench/bench_lora.py [--size small] [--batch 16] [--seq 128] [--rank 8]
        [--iters 5] [--repeat 3]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

import common  # noqa: E402  (bench/: the script's own folder)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

MODES = ("full", "lora")


def measure(args):
    """One mode in this process: JSON with trainable parameters, step times and peak RSS."""
    import keras
    import tensorflow as tf

    import keras_bert
    from keras_bert.models import lora
    from keras_bert.models.task_models import BertClassifier
    from keras_bert.training import optimizers

    keras.utils.set_random_seed(0)
    config = keras_bert.BertConfig.preset(args.size)
    model = BertClassifier(keras_bert.BertEncoder(config), num_classes=2)
    if args.mode == "lora":
        lora.enable_lora(model.encoder, args.rank)
    variables = model.trainable_variables
    optimizer = optimizers.create_optimizer(
        2e-5, 1000, 100, variables=variables, optimizer="adam_weight_decay"
    )
    optimizer.build(variables)
    inputs = common.random_encoder_batch(args.batch, args.seq, config.vocab_size)
    labels = tf.constant([i % 2 for i in range(args.batch)])

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)["logits"]
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            )
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    timing = common.time_call(step, warmup=2, iters=args.iters)
    print(
        json.dumps(
            {
                "trainable": lora.count_parameters(variables),
                "all": lora.full_finetuning_parameters(model),
                "median": timing["median"],
                "cpu": timing["cpu"],
                "times": timing["times"],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small", help="BertConfig preset.")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--iters", type=int, default=5, help="Timed steps per process.")
    parser.add_argument("--repeat", type=int, default=3, help="Rounds (modes alternating).")
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        return measure(args)
    flags = [f"--{k}={getattr(args, k)}" for k in ("size", "batch", "seq", "rank", "iters")]
    rounds = {mode: [] for mode in MODES}
    for round_index in range(args.repeat):
        for mode in MODES if round_index % 2 == 0 else reversed(MODES):
            done = subprocess.run(
                [sys.executable, __file__, f"--mode={mode}", *flags],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rounds[mode].append(result)
            print(
                f"  round {round_index + 1} {mode:4s}: step {result['median'] * 1e3:7.1f} ms "
                f"(cpu {result['cpu'] * 1e3:.1f}), peak RSS {result['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    full, low = rounds["full"], rounds["lora"]
    wall = [f["median"] / x["median"] for f, x in zip(full, low)]
    cpu = [f["cpu"] / x["cpu"] for f, x in zip(full, low)]
    rss = [x["peak_rss_mb"] / f["peak_rss_mb"] for f, x in zip(full, low)]
    print(
        f"\nBERT {args.size}, batch {args.batch} x seq {args.seq}, LoRA rank {args.rank}, "
        f"{os.cpu_count()} CPUs, {args.repeat} rounds of {args.iters} steps"
    )
    print(
        f"trainable parameters: full {full[0]['trainable']:,}, LoRA {low[0]['trainable']:,} "
        f"({100 * low[0]['trainable'] / full[0]['all']:.2f}%)"
    )
    print(
        f"training step, full / LoRA: {statistics.median(wall):.2f}x wall (rounds "
        f"{' '.join(f'{w:.2f}' for w in wall)}), {statistics.median(cpu):.2f}x cpu time"
    )
    print(
        f"peak resident memory, LoRA / full: {statistics.median(rss):.2f} (full "
        f"{statistics.median(f['peak_rss_mb'] for f in full):.0f} MB, LoRA "
        f"{statistics.median(x['peak_rss_mb'] for x in low):.0f} MB)"
    )


if __name__ == "__main__":
    common.run_and_record(main, __file__)
