"""Encoder forward throughput: keras_bert vs keras-hub BertBackbone vs tf-models-official
BertEncoder.

Same config (BERT-base by default, vocab 30522), same random padded batch, inference
(training=False), float32, each in graph mode (tf.function) and with XLA
(jit_compile=True); then bfloat16 (Keras mixed_bfloat16) for ours and keras-hub, with
the output difference it costs against float32 with the same weights. GFLOP/s count
the forward's matmuls (see `common.encoder_flops`) and are compared with a square
tf.matmul roofline measured in the same run.

    .venv/bin/python bench/bench_encoder.py [--size base] [--batch 8] [--seq 128]
        [--iters 3] [--repeat 1] [--dynamic] [--no-bf16] [--bf16-xla] [--plot bench/out/encoder.png]
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import keras_bert  # noqa: E402
from keras_bert.inputs import INPUT_NAMES  # noqa: E402


def build_ours(config, dtype):
    """keras_bert.BertEncoder -> (model, fn(inputs) -> sequence_output)."""
    model = keras_bert.BertEncoder(config, dtype=dtype)
    return model, lambda inputs: model(inputs, training=False)["sequence_output"]


def build_keras_hub(config, dtype):
    """keras_hub.models.BertBackbone with the same sizes."""
    model = common.keras_hub_backbone(config, dtype)
    return model, lambda inputs: model(common.keras_hub_inputs(inputs), training=False)[
        "sequence_output"
    ]


def build_tf_models(config, dtype):
    """official.nlp.modeling.networks.BertEncoderV2 (tf_keras), exact GELU like ours."""
    if dtype != "float32":
        raise ValueError("tf-models-official is benchmarked in float32 only.")
    import tf_keras
    from official.nlp.modeling import networks

    model = networks.BertEncoderV2(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        inner_dim=config.intermediate_size,
        inner_activation=lambda x: tf_keras.activations.gelu(x, approximate=False),
        output_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob,
    )
    return model, lambda inputs: model(inputs, training=False)["sequence_output"]


PEERS = {"ours": build_ours, "keras-hub": build_keras_hub, "tf-models": build_tf_models}


def prepare(config, batch, seq, dtypes, peers, bf16_xla):
    """Builds and compiles every (peer, dtype, mode) asked; the first call traces and compiles.

    Returns:
        (cases, outputs): cases a list of dicts with `name`, `dtype`, `mode`, `call` (runs
        one batch) and `rounds` (empty list); outputs the float32 NumPy sequence_output of
        each (peer, dtype) in graph mode, for the bfloat16 difference.
    """
    inputs = {
        k: tf.constant(v)
        for k, v in common.random_encoder_batch(batch, seq, config.vocab_size).items()
    }
    cases, outputs = [], {}
    for dtype in dtypes:
        for name in peers:
            if dtype != "float32" and name == "tf-models":
                continue
            keras.utils.set_random_seed(0)  # Same weights for float32 and bfloat16 of one peer.
            model, fn = PEERS[name](config, dtype)
            for mode, jit in common.MODES.items():
                if dtype != "float32" and jit and not bf16_xla:
                    continue
                compiled = tf.function(fn, jit_compile=jit)
                out = compiled(inputs)  # Trace (and XLA-compile) once, untimed.
                if not jit:
                    outputs[name, dtype] = np.asarray(out, "float32")
                cases.append(
                    {
                        "name": name,
                        "dtype": dtype,
                        "mode": mode,
                        "rounds": [],
                        "model": model,
                        "call": lambda compiled=compiled: compiled(inputs),
                    }
                )
    return cases, outputs


def run_rounds(cases, iters, repeat):
    """Times every case `iters` times per round, cases interleaved, for `repeat` rounds."""
    for round_index in range(repeat):
        for case in cases:
            t = common.time_call(case["call"], warmup=1, iters=iters)
            case["rounds"].append(t)
            print(
                f"  round {round_index + 1}: {case['name']:9s} {case['dtype']:14s} "
                f"{case['mode']:5s} {t['median'] * 1e3:8.1f} ms (min {t['min'] * 1e3:.1f}, max "
                f"{t['max'] * 1e3:.1f}, cpu {t['cpu'] * 1e3:.1f})",
                flush=True,
            )
    rows = []
    for case in cases:
        times = [x for t in case["rounds"] for x in t["times"]]
        rows.append(
            {
                "name": case["name"],
                "dtype": case["dtype"],
                "mode": case["mode"],
                "rounds": case["rounds"],
                "median": float(np.median(times)),
                "min": min(times),
                "max": max(times),
                "cpu": float(np.median([t["cpu"] for t in case["rounds"]])),
            }
        )
    return rows


def run_dynamic(config, batch, long_seq, short_seq, iters):
    """Ours with one tf.function for any [B, S]: times both lengths and counts traces."""
    model = keras_bert.BertEncoder(config)
    traces = []
    spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in INPUT_NAMES}

    @tf.function(input_signature=[spec])
    def forward(inputs):
        traces.append(1)  # Runs only while tracing.
        return model(inputs, training=False)["sequence_output"]

    result = {}
    for seq in (long_seq, short_seq):
        inputs = {
            k: tf.constant(v)
            for k, v in common.random_encoder_batch(batch, seq, config.vocab_size).items()
        }
        result[seq] = common.time_call(
            lambda inputs=inputs: forward(inputs), warmup=1, iters=iters
        )["median"]
    return result, len(traces)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_size_args(parser, size="base")
    parser.add_argument("--peers", default="ours,keras-hub,tf-models")
    parser.add_argument("--no-bf16", action="store_true", help="Skip the mixed_bfloat16 rows.")
    parser.add_argument(
        "--bf16-xla",
        action="store_true",
        help="Also time mixed_bfloat16 under XLA (slow on CPU: XLA:CPU has no oneDNN bf16 matmul).",
    )
    parser.add_argument(
        "--dynamic",
        action="store_true",
        help="Also time ours at --seq and --seq/4 with one graph, counting retraces.",
    )
    parser.add_argument(
        "--plot", default="bench/out/encoder.png", help="PNG bar chart path ('' for none)."
    )
    args = parser.parse_args(argv)

    config = keras_bert.BertConfig.preset(args.size)
    peers = [p for p in args.peers.split(",") if p]
    dtypes = ["float32"] if args.no_bf16 else ["float32", "mixed_bfloat16"]
    flops = common.encoder_flops(config, args.batch, args.seq)
    print(
        f"BERT {args.size}: L={config.num_hidden_layers} H={config.hidden_size} "
        f"V={config.vocab_size}, batch {args.batch} x seq {args.seq}, {flops / 1e9:.1f} GFLOP per "
        f"forward; TF {tf.__version__}, keras {keras.__version__}, {os.cpu_count()} CPUs"
    )
    matmul_dtypes = {"float32": "float32", "mixed_bfloat16": "bfloat16"}
    roofline = {d: common.matmul_roofline(matmul_dtypes[d]) for d in dtypes}
    cases, outputs = prepare(config, args.batch, args.seq, dtypes, peers, args.bf16_xla)
    rows = run_rounds(cases, args.iters, args.repeat)
    # A peak: the better of before and after, as another job may have run during one of them.
    roofline = {d: max(v, common.matmul_roofline(matmul_dtypes[d])) for d, v in roofline.items()}
    print(
        "matmul roofline (2048^3 tf.matmul, best of before and after): "
        + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in roofline.items())
    )
    table = []
    for r in rows:
        gflops = flops / r["median"] / 1e9
        table.append(
            [
                r["name"],
                r["dtype"],
                r["mode"],
                r["median"] * 1e3,
                r["cpu"] * 1e3,
                args.batch / r["median"],
                gflops,
                f"{100 * gflops / roofline[r['dtype']]:.0f}%",
                f"{(r['max'] - r['min']) / r['median']:.0%}",
            ]
        )
    print()
    print(
        common.format_table(
            [
                "model",
                "dtype",
                "mode",
                "ms/batch",
                "cpu ms",
                "seq/s",
                "GFLOP/s",
                "of roofline",
                "spread",
            ],
            table,
        )
    )

    by_key = {(r["name"], r["dtype"], r["mode"]): r for r in rows}
    print()
    for dtype in dtypes:
        for mode in common.MODES:
            ours = by_key.get(("ours", dtype, mode))
            for peer in ("keras-hub", "tf-models"):
                other = by_key.get((peer, dtype, mode))
                if ours and other:
                    wall = [
                        o["median"] / u["median"] for o, u in zip(other["rounds"], ours["rounds"])
                    ]
                    cpu = [o["cpu"] / u["cpu"] for o, u in zip(other["rounds"], ours["rounds"])]
                    print(
                        f"speed ours/{peer:9s} {dtype:14s} {mode:5s}: {np.median(wall):.2f}x wall "
                        f"(rounds {' '.join(f'{w:.2f}' for w in wall)}), {np.median(cpu):.2f}x cpu "
                        f"time (rounds {' '.join(f'{c:.2f}' for c in cpu)})"
                    )
    for name in peers:
        if (name, "mixed_bfloat16") in outputs:
            diff = np.abs(outputs[name, "mixed_bfloat16"] - outputs[name, "float32"])
            print(
                f"bfloat16 vs float32 sequence_output, {name}: max abs diff {diff.max():.3g}, "
                f"mean abs diff {diff.mean():.3g}"
            )

    if args.dynamic:
        short = max(1, args.seq // 4)
        result, traces = run_dynamic(config, args.batch, args.seq, short, args.iters)
        print(
            "dynamic length (ours, graph, one tf.function with [None, None] inputs): seq "
            f"{args.seq} {result[args.seq] * 1e3:.1f} ms, seq {short} {result[short] * 1e3:.1f} ms "
            f"({result[args.seq] / result[short]:.1f}x faster), traced {traces} time(s)"
        )

    if args.plot:
        labels = [f"{r['name']} {r['dtype'].replace('mixed_', '')} {r['mode']}" for r in rows]
        series = {
            "per wall second": [flops / r["median"] / 1e9 for r in rows],
            "per CPU second x cores (load-independent)": [
                flops / (r["cpu"] / os.cpu_count()) / 1e9 for r in rows
            ],
        }
        common.save_bar_chart(
            args.plot,
            labels,
            series,
            "GFLOP/s",
            f"BERT-{args.size} forward, batch {args.batch} x seq {args.seq}, CPU",
            reference=("float32 matmul roofline", roofline["float32"]),
        )
        print(f"chart: {args.plot}")


if __name__ == "__main__":
    common.run_and_record(main, __file__)
