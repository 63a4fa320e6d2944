"""Encoder forward throughput: keras_bert vs keras-hub BertBackbone (vs tf-models-official
BertEncoder on TensorFlow), on each Keras backend asked.

Same config (BERT-base by default, vocab 30522), same random padded batch, inference
(training=False), float32 and bfloat16 (Keras mixed_bfloat16, with the output difference it
costs against float32 with the same weights). Each backend runs in its own process
(`bench/backends.py`), the backends' rounds interleaved: TensorFlow in graph mode
(tf.function) and with XLA (jit_compile=True), JAX with jax.jit (XLA), PyTorch eagerly.
keras-hub's BertBackbone runs on every backend: it is the peer measured in the same run, and
the ratios are per round (medians and each round's). GFLOP/s count the forward's matmuls (see
`common.encoder_flops`) and are compared with a square matmul roofline measured by the same
backend in the same run.

    .venv/bin/python bench/bench_encoder.py [--backend tensorflow,jax] [--size base]
        [--batch 8] [--seq 128] [--iters 3] [--repeat 1] [--dynamic] [--no-bf16] [--bf16-xla]
        [--plot bench/out/encoder.png]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import backends  # noqa: E402  (bench/: the script's own folder)
import common  # noqa: E402

from keras_bert.testing.keras_hub_weights import keras_hub_inputs  # noqa: E402

OUTPUT = "sequence_output"
MATMUL_DTYPES = {"float32": "float32", "mixed_bfloat16": "bfloat16"}


def build_ours(config, dtype):
    """keras_bert.BertEncoder -> (model, fn(inputs) -> sequence_output)."""
    import keras_bert

    model = keras_bert.BertEncoder(config, dtype=dtype)
    return model, lambda inputs: model(inputs, training=False)[OUTPUT]


def build_keras_hub(config, dtype):
    """keras_hub.models.BertBackbone with the same sizes."""
    model = common.keras_hub_backbone(config, dtype)
    return model, lambda inputs: model(keras_hub_inputs(inputs), training=False)[OUTPUT]


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
    return model, lambda inputs: model(inputs, training=False)[OUTPUT]


PEERS = {"ours": build_ours, "keras-hub": build_keras_hub, "tf-models": build_tf_models}


def wanted(name, dtype, mode, backend, bf16_xla):
    """Whether the (peer, dtype, mode) case runs: tf-models only on TensorFlow in float32 (a
    tf_keras model); TensorFlow's bfloat16 under XLA only with --bf16-xla."""
    if name == "tf-models" and (backend != "tensorflow" or dtype != "float32"):
        return False
    return not (backend == "tensorflow" and dtype != "float32" and mode == "xla" and not bf16_xla)


def prepare(config, batch, seq, dtypes, peers, bf16_xla):
    """Builds and compiles every (peer, dtype, mode) asked on this process' backend; the first
    call traces and compiles.

    Returns:
        (cases, outputs): cases a list of dicts with `key` (name, dtype, mode) and `call` (runs
        one batch); outputs the float32 NumPy sequence_output of each (peer, dtype) in its
        first mode, for the bfloat16 difference.
    """
    import keras

    backend = keras.config.backend()
    inputs = {
        k: keras.ops.convert_to_tensor(v)
        for k, v in common.random_encoder_batch(batch, seq, config.vocab_size).items()
    }
    cases, outputs = [], {}
    for dtype in dtypes:
        for name in peers:
            modes = [
                m for m in backends.compile_modes() if wanted(name, dtype, m, backend, bf16_xla)
            ]
            if not modes:
                continue
            keras.utils.set_random_seed(0)  # Same weights for float32 and bfloat16 of one peer.
            model, fn = PEERS[name](config, dtype)
            for mode in modes:
                compiled = backends.compile_forward(model, fn, mode)
                out = compiled(inputs)  # Trace (and XLA-compile) once, untimed.
                if (name, dtype) not in outputs:
                    outputs[name, dtype] = backends.to_numpy(fn(inputs) if out is None else out)
                cases.append(
                    {
                        "key": {"model": name, "dtype": dtype, "mode": mode},
                        "call": lambda compiled=compiled: compiled(inputs),
                    }
                )
    return cases, outputs


def run_dynamic(config, batch, long_seq, short_seq, iters):
    """TensorFlow: ours with one tf.function for any [B, S]: times both lengths and counts
    traces."""
    import tensorflow as tf

    import keras_bert
    from keras_bert.inputs import INPUT_NAMES

    model = keras_bert.BertEncoder(config)
    traces = []
    spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in INPUT_NAMES}

    @tf.function(input_signature=[spec])
    def forward(inputs):
        traces.append(1)  # Runs only while tracing.
        return model(inputs, training=False)[OUTPUT]

    result = {}
    for seq in (long_seq, short_seq):
        inputs = {
            k: tf.constant(v)
            for k, v in common.random_encoder_batch(batch, seq, config.vocab_size).items()
        }
        result[seq] = common.time_call(
            lambda inputs=inputs: forward(inputs), warmup=1, iters=iters
        )["median"]
    return {"seconds": result, "traces": len(traces)}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_size_args(parser, size="base")
    parser.add_argument(
        "--backend",
        default="tensorflow,jax",
        help="Keras backends, comma-separated (tensorflow, jax, torch) or 'all' (those installed).",
    )
    parser.add_argument("--peers", default="ours,keras-hub,tf-models")
    parser.add_argument("--no-bf16", action="store_true", help="Skip the mixed_bfloat16 rows.")
    parser.add_argument(
        "--bf16-xla",
        action="store_true",
        help="TensorFlow: also time mixed_bfloat16 under XLA (slow on CPU: XLA:CPU has no "
        "oneDNN bf16 matmul).",
    )
    parser.add_argument(
        "--dynamic",
        action="store_true",
        help="TensorFlow: also time ours at --seq and --seq/4 with one graph, counting retraces.",
    )
    parser.add_argument(
        "--plot", default="bench/out/encoder.png", help="PNG bar chart path ('' for none)."
    )
    return parser.parse_args(argv)


def worker(argv):
    """One backend's process (`backends.serve`): builds and compiles the cases, then times rounds
    as the parent asks."""
    args = parse_args(argv)
    import keras

    import keras_bert

    backend = keras.config.backend()
    config = keras_bert.BertConfig.preset(args.size)
    dtypes = ["float32"] if args.no_bf16 else ["float32", "mixed_bfloat16"]
    roofline = {d: backends.matmul_roofline(MATMUL_DTYPES[d]) for d in dtypes}
    peers = [p for p in args.peers.split(",") if p]
    cases, outputs = prepare(config, args.batch, args.seq, dtypes, peers, args.bf16_xla)
    diffs = {}
    for name in peers:
        if (name, "mixed_bfloat16") in outputs:
            diff = abs(outputs[name, "mixed_bfloat16"] - outputs[name, "float32"])
            diffs[name] = {"max": float(diff.max()), "mean": float(diff.mean())}

    def finish():
        # A peak: the better of before and after, as another job may have run during one.
        peak = {d: max(v, backends.matmul_roofline(MATMUL_DTYPES[d])) for d, v in roofline.items()}
        dynamic = None
        if args.dynamic and backend == "tensorflow":
            short = max(1, args.seq // 4)
            dynamic = run_dynamic(config, args.batch, args.seq, short, args.iters)
        return {"roofline": peak, "dynamic": dynamic}

    info = {"version": _backend_version(backend), "keras": keras.__version__, "diffs": diffs}
    backends.serve(cases, info, args.iters, finish)


def _backend_version(backend):
    module = __import__(backend)
    return module.__version__


def speed_lines(rows):
    """Ratio lines: ours against each peer on the same backend, dtype and mode, and each backend
    against TensorFlow for the same model and dtype (per round, the rounds interleaved)."""
    peers = backends.ratio_lines(
        rows,
        lambda r: r["model"] == "ours",
        lambda r: r["model"] != "ours",
        ("backend", "dtype", "mode"),
        lambda f, s: f"ours/{s['model']} {f['backend']} {f['dtype']} {f['mode']}",
    )
    return peers + backends.versus_tensorflow(rows, ("model", "dtype"))


def main(argv=None):
    argv, args, names, config = backends.start(
        parse_args,
        argv,
        lambda args, config: (
            f"batch {args.batch} x seq {args.seq}, "
            f"{common.encoder_flops(config, args.batch, args.seq) / 1e9:.1f} GFLOP per forward"
        ),
    )
    flops = common.encoder_flops(config, args.batch, args.seq)
    results = backends.run("bench_encoder", names, argv, args.repeat)
    rows = backends.cases_table(results)
    for backend, result in results.items():
        roofline = result["final"]["roofline"]
        print(
            f"{backend} {result['info']['version']} (keras {result['info']['keras']}): matmul "
            "roofline (2048^3, best of before and after) "
            + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in roofline.items())
        )
    table = []
    for r in rows:
        gflops = flops / r["median"] / 1e9
        peak = results[r["backend"]]["final"]["roofline"][r["dtype"]]
        table.append(
            [
                r["backend"],
                r["model"],
                r["dtype"],
                r["mode"],
                r["median"] * 1e3,
                r["cpu"] * 1e3,
                args.batch / r["median"],
                gflops,
                f"{100 * gflops / peak:.0f}%",
                f"{(r['max'] - r['min']) / r['median']:.0%}",
            ]
        )
    header = ["backend", "model", "dtype", "mode", "ms/batch", "cpu ms", "seq/s", "GFLOP/s"]
    print()
    print(common.format_table(header + ["of roofline", "spread"], table))
    print()
    lines = speed_lines(rows)
    for line in lines:
        print(line)
    for backend, result in results.items():
        for name, diff in result["info"]["diffs"].items():
            print(
                f"bfloat16 vs float32 sequence_output, {name} on {backend}: max abs diff "
                f"{diff['max']:.3g}, mean abs diff {diff['mean']:.3g}"
            )
    dynamic = results.get("tensorflow", {}).get("final", {}).get("dynamic")
    if dynamic:
        short = max(1, args.seq // 4)
        seconds = {int(k): v for k, v in dynamic["seconds"].items()}
        print(
            "dynamic length (ours, TensorFlow graph, one tf.function with [None, None] inputs): "
            f"seq {args.seq} {seconds[args.seq] * 1e3:.1f} ms, seq {short} "
            f"{seconds[short] * 1e3:.1f} ms ({seconds[args.seq] / seconds[short]:.1f}x faster), "
            f"traced {dynamic['traces']} time(s)"
        )
    if args.plot:
        plot(args, rows, flops, results)
    return {
        "rows": [{k: v for k, v in r.items() if k != "rounds"} for r in rows],
        "speed": lines,
    }


def plot(args, rows, flops, results):
    """The table's GFLOP/s per wall second and per CPU second as a bar chart."""
    labels = [
        f"{r['backend']} {r['model']} {r['dtype'].replace('mixed_', '')} {r['mode']}" for r in rows
    ]
    series = {
        "per wall second": [flops / r["median"] / 1e9 for r in rows],
        "per CPU second x cores (load-independent)": [
            flops / (r["cpu"] / os.cpu_count()) / 1e9 for r in rows
        ],
    }
    roofline = max(result["final"]["roofline"]["float32"] for result in results.values())
    common.save_bar_chart(
        args.plot,
        labels,
        series,
        "GFLOP/s",
        f"BERT-{args.size} forward, batch {args.batch} x seq {args.seq}, CPU",
        reference=("float32 matmul roofline (best backend)", roofline),
    )
    print(f"chart: {args.plot}")


if __name__ == "__main__":
    common.run_and_record(main, __file__)
