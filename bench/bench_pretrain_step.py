"""One pre-training step: keras_bert.BertPretrainer vs keras_hub.models.BertMaskedLM, on each
Keras backend asked.

What `fit` runs per step (the model's `train_step`: forward, loss, gradients, the update of
the package's optimizer, `create_optimizer`'s AdamW with warmup, decay and global-norm
clipping, metrics) on the same random batch shaped like the original pre-training TFRecords
(`masked_lm_positions` etc.; 20 masked positions at sequence 128, 80 at 512). TensorFlow:
`train_step` in a tf.function, graph and XLA (jit_compile=True); JAX: Keras' jitted train
function (XLA) with the state passed from step to step as `fit` does; PyTorch: eager
`train_on_batch`. Each backend runs in its own process (`bench/backends.py`), the rounds
interleaved. keras-hub's BertMaskedLM has no next-sentence head, so the like-for-like row is
ours with `next_sentence=False` (MLM only); ours with the paper's MLM + NSP is shown too. Two
more rows on request (`--peers`, and in the GPU preset): "ours MLM+NSP packed" trains on packed
rows (`random_packed_batch`: 4 instances per row, 90-100% real tokens,
`BertPretrainer(packed=True)`), "ours ELECTRA" is `ElectraPretrainer` (a generator 1/4 as wide)
on the unpacked batch. `real tokens/s` counts only the non-padding
positions of each row's batch.

Tokens per second count every position of the batch (B x S). Model FLOPs utilization (MFU) is
`common.pretraining_step_flops` per second over the device's peak (`--peak-tflops`; by default
the dense bfloat16 peak of an H100/H200 that JAX reports, none on a CPU); `mfu_6n` is the same
with 6 x all trainable parameters x tokens (embedding tables included) plus the attention.

    .venv/bin/python bench/bench_pretrain_step.py [--backend tensorflow,jax] [--size small]
        [--batch 8] [--seq 128] [--predictions auto] [--dtype float32] [--iters 3] [--repeat 1]

On a GPU (BERT-base, bf16, sequence 128 and 512, JAX, with the packed and ELECTRA rows; under 7
minutes on an H100; the last line printed is the results as JSON):

    bash bench/gpu_pretrain_jax.sh        # = bench_pretrain_step.py --preset gpu
"""

import argparse
import json
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import backends  # noqa: E402  (bench/: the script's own folder)
import common  # noqa: E402
import numpy as np  # noqa: E402

from keras_bert.testing.keras_hub_weights import keras_hub_inputs  # noqa: E402

MODELS = ("ours MLM+NSP", "ours MLM", "keras-hub MLM", "ours MLM+NSP packed", "ours ELECTRA")
DEFAULT_PEERS = MODELS[:3]
PACKED_INSTANCES = 4  # Instances per packed row of "ours MLM+NSP packed".
PRESETS = {
    # BERT-base pre-training on one GPU: 32,768 tokens per step at both lengths.
    "gpu": dict(
        backend="jax",
        size="base",
        dtype="mixed_bfloat16",
        seq="128,512",
        batch="256,64",
        peers="ours MLM+NSP,keras-hub MLM,ours MLM+NSP packed,ours ELECTRA",
        iters=10,
        repeat=2,
    ),
}
# Dense bfloat16 peaks (TFLOP/s) by the device kind JAX reports: NVIDIA's data sheets (H100
# SXM and H200 989.4, H100 NVL 835, H100 PCIe 756). The first name found in the kind wins.
PEAK_BF16_TFLOPS = (("H200", 989.4), ("H100 NVL", 835.0), ("H100 PCIe", 756.0), ("H100", 989.4))


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


# Packed record feature -> model input / label name (keras_bert.pretraining.records' names,
# which import TensorFlow: the GPU machine has none; a test keeps the two equal).
PACKED_NAMES = {
    "input_ids": "input_word_ids",
    "segment_ids": "input_type_ids",
    "position_ids": "input_position_ids",
    "instance_ids": "input_instance_ids",
}


def random_packed_batch(batch, seq, predictions, vocab_size, instances=PACKED_INSTANCES, seed=0):
    """Packed rows of random tokens, packed by the writer's own `pack_examples`
    (`keras_bert.pretraining.packing`): per row, `instances` examples of the original format of
    random lengths filling 90-100% of the row, `predictions` masked positions per row among the
    tokens after the instances' [CLS] (each example keeps those inside it).

    Returns:
        (inputs, labels) as `records.make_dataset(..., max_instances=instances)` gives them.
    """
    from keras_bert.pretraining.packing import pack_examples

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(batch):
        total = int(rng.integers(int(0.9 * seq), seq + 1))
        shortest = max(2, total // (2 * instances))
        lengths = shortest + rng.multinomial(
            total - instances * shortest, [1 / instances] * instances
        )
        starts = np.cumsum(lengths) - lengths  # Where each example's tokens fall in the row.
        candidates = np.setdiff1d(np.arange(total), starts)
        chosen = np.sort(rng.choice(candidates, size=predictions, replace=False))
        examples = {k: np.zeros((instances, seq), np.int64) for k in ("input_ids", "input_mask")}
        examples["segment_ids"] = np.zeros((instances, seq), np.int64)
        for k, dtype in (("positions", np.int64), ("ids", np.int64), ("weights", np.float32)):
            examples[f"masked_lm_{k}"] = np.zeros((instances, predictions), dtype)
        examples["next_sentence_labels"] = rng.integers(0, 2, size=(instances, 1))
        for i, (start, n) in enumerate(zip(starts, lengths, strict=True)):
            examples["input_ids"][i, :n] = rng.integers(1, vocab_size, size=n)
            examples["input_mask"][i, :n] = 1
            examples["segment_ids"][i, n // 2 : n] = 1
            mine = chosen[(chosen >= start) & (chosen < start + n)] - start
            examples["masked_lm_positions"][i, : len(mine)] = mine
            examples["masked_lm_ids"][i, : len(mine)] = examples["input_ids"][i, mine]
            examples["masked_lm_weights"][i, : len(mine)] = 1.0
        packed, bins = pack_examples(examples, instances, predictions)
        assert len(bins) == 1  # The row's examples fill one row.
        rows.append(packed)
    packed = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
    inputs = {name: packed[k].astype(np.int32) for k, name in PACKED_NAMES.items()}
    for k in ("masked_lm_positions", "cls_positions"):
        inputs[k] = packed[k].astype(np.int32)
    labels = {k: packed[k].astype(np.int32) for k in ("masked_lm_ids", "next_sentence_labels")}
    for k in ("masked_lm_weights", "next_sentence_weights"):
        labels[k] = packed[k].astype(np.float32)
    return inputs, labels


def build(name, config, dtype, inputs, labels):
    """One of `MODELS` -> (model, data): data is what its `train_step` takes, (x, y) or
    (x, y, sample_weight). "ours MLM+NSP packed" takes `random_packed_batch`'s rows."""
    if name.startswith("ours"):
        import keras_bert

        encoder = keras_bert.BertEncoder(config, dtype=dtype)
        if name == "ours ELECTRA":
            from keras_bert.models.electra import ElectraPretrainer, with_original_ids

            return ElectraPretrainer(encoder, seed=0), with_original_ids(inputs, labels)
        model = keras_bert.BertPretrainer(
            encoder, next_sentence="NSP" in name, packed=name.endswith("packed")
        )
        return model, (inputs, labels)
    import keras_hub

    model = keras_hub.models.BertMaskedLM(
        common.keras_hub_backbone(config, dtype), preprocessor=None
    )
    x = {**keras_hub_inputs(inputs), "mask_positions": inputs["masked_lm_positions"]}
    return model, (x, labels["masked_lm_ids"], labels["masked_lm_weights"])


def compiled(model, jit):
    """`model` compiled with the package's pre-training optimizer (AdamW, warmup, decay,
    clipping; keras-hub keeps its default loss and weighted accuracy)."""
    from keras_bert.training.optimizers import create_optimizer

    optimizer = create_optimizer(
        1e-4, num_train_steps=10_000, num_warmup_steps=100, variables=model.trainable_variables
    )
    model.compile(optimizer=optimizer, jit_compile=jit)
    return model


def step_calls(model, data):
    """Per mode of this backend (`backends.compile_modes`): a function of no arguments that runs
    one training step and returns its loss (computed). The first step runs here, untimed."""
    import keras

    backend = keras.config.backend()
    data = keras.tree.map_structure(keras.ops.convert_to_tensor, data)
    if backend == "tensorflow":
        import tensorflow as tf

        compiled(model, jit=False).train_on_batch(*data)  # Builds the optimizer and metrics.
        calls = {}
        for mode, jit in backends.compile_modes().items():
            step = tf.function(model.train_step, jit_compile=jit)
            step(data)  # Trace (and XLA-compile).
            calls[mode] = lambda step=step: step(data)["loss"]
        return calls
    if backend == "jax":
        import jax

        compiled(model, jit=True).train_on_batch(*data)  # Builds and compiles the step.
        state = {
            "state": (
                [v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
                [v.value for v in model.optimizer.variables],
                [v.value for v in model.metrics_variables],
            )
        }

        def step():  # As `fit` does: the state goes from step to step, donated.
            logs, state["state"] = model.train_function(state["state"], iter([data]))
            return jax.block_until_ready(logs["loss"])

        return {"jit": step}
    compiled(model, jit=False).train_on_batch(*data)
    return {"eager": lambda: model.train_on_batch(*data, return_dict=True)["loss"]}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="Defaults for a job: 'gpu' = " + json.dumps(PRESETS["gpu"]) + " (flags override).",
    )
    parser.add_argument("--size", default="small", help="BertConfig preset (tiny ... base).")
    parser.add_argument("--seq", default="128", help="Sequence lengths, comma-separated.")
    parser.add_argument("--batch", default="8", help="Batch size, one or one per --seq.")
    parser.add_argument(
        "--iters", type=int, default=3, help="Timed steps per configuration and round."
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Rounds over all configurations (interleaved); ratios are medians over rounds.",
    )
    parser.add_argument(
        "--backend",
        default="tensorflow,jax",
        help="Keras backends, comma-separated (tensorflow, jax, torch) or 'all' (those installed).",
    )
    parser.add_argument("--peers", default=",".join(DEFAULT_PEERS), help=f"Some of {MODELS}.")
    parser.add_argument("--dtype", default="float32", choices=["float32", "mixed_bfloat16"])
    parser.add_argument(
        "--predictions",
        default="auto",
        help="Masked positions per sequence, one or one per --seq ('auto': 15%% rounded up to 4).",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="The device's peak TFLOP/s for MFU (default: dense bf16 of an H100/H200 found by "
        "JAX, else no MFU).",
    )
    known, _ = parser.parse_known_args(argv)
    if known.preset:
        parser.set_defaults(**PRESETS[known.preset])
    args = parser.parse_args(argv)
    args.seqs = [int(s) for s in str(args.seq).split(",")]
    args.batches = _per_seq(args.batch, args.seqs, int, "--batch")
    args.predictions = (
        [common.default_predictions(s) for s in args.seqs]
        if args.predictions == "auto"
        else _per_seq(args.predictions, args.seqs, int, "--predictions")
    )
    args.models = [p for p in args.peers.split(",") if p]
    unknown = set(args.models) - set(MODELS)
    if unknown:
        parser.error(f"--peers: unknown {sorted(unknown)}; choose from {MODELS}.")
    return args


def _per_seq(text, seqs, kind, flag):
    values = [kind(v) for v in str(text).split(",")]
    if len(values) == 1:
        return values * len(seqs)
    if len(values) != len(seqs):
        raise ValueError(f"{flag} needs one value or one per --seq ({len(seqs)}), got {text!r}.")
    return values


def worker(argv):
    """One backend's process (`backends.serve`): builds, compiles and runs a first step of every
    (model, sequence length), then times rounds as the parent asks."""
    args = parse_args(argv)
    import keras

    import keras_bert

    # The pooler has no gradient without NSP (ours MLM-only, keras-hub): expected.
    warnings.filterwarnings("ignore", message="Gradients do not exist")
    config = keras_bert.BertConfig.preset(args.size)
    cases, params = [], {}
    for seq, batch, predictions in zip(args.seqs, args.batches, args.predictions):
        unpacked = random_pretraining_batch(batch, seq, predictions, config.vocab_size)
        packed = random_packed_batch(batch, seq, predictions, config.vocab_size)
        for name in args.models:
            keras.utils.set_random_seed(0)
            inputs, labels = packed if name.endswith("packed") else unpacked
            model, data = build(name, config, args.dtype, inputs, labels)
            params[name] = int(sum(np.prod(v.shape) for v in model.trainable_variables))
            real = float((inputs.get("input_instance_ids", inputs.get("input_mask")) > 0).mean())
            for mode, call in step_calls(model, data).items():
                key = {"model": name, "seq": seq, "batch": batch, "predictions": predictions}
                key["real_share"] = real
                cases.append({"key": {**key, "mode": mode}, "call": call})
    backend = keras.config.backend()
    info = {
        "version": __import__(backend).__version__,
        "keras": keras.__version__,
        "device": _device(backend),
        "params": params,
    }
    backends.serve(cases, info, args.iters)


def _device(backend):
    """The device the steps ran on, as its backend names it."""
    if backend == "jax":
        import jax

        devices = jax.devices()
        return {"kind": devices[0].device_kind, "count": len(devices)}
    if backend == "torch":
        return {"kind": "cpu", "count": 1}  # Keras' torch backend on this build: the CPU.
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return {"kind": "GPU" if gpus else "cpu", "count": max(1, len(gpus))}


def peak_tflops(args, device_kind):
    """--peak-tflops, else the bf16 data-sheet peak of the device kind (bf16 runs), else None."""
    if args.peak_tflops:
        return args.peak_tflops
    if args.dtype != "mixed_bfloat16":
        return None
    return next((peak for name, peak in PEAK_BF16_TFLOPS if name in device_kind), None)


def result_rows(args, config, results):
    """Per case: step times, tokens per second, model TFLOP/s and MFU (JSON-able dicts)."""
    rows = []
    for r in backends.cases_table(results):
        info = results[r["backend"]]["info"]
        peak = peak_tflops(args, info["device"]["kind"])
        if r["model"] == "ours ELECTRA":
            flops = common.electra_step_flops(config, r["batch"], r["seq"], r["predictions"])
        else:
            flops = common.pretraining_step_flops(
                config, r["batch"], r["seq"], r["predictions"], next_sentence="NSP" in r["model"]
            )
        # 6 x all trainable parameters x tokens, plus the attention (12 L H S per token).
        tokens = r["batch"] * r["seq"]
        h, layers = config.hidden_size, config.num_hidden_layers
        flops_6n = 6.0 * info["params"][r["model"]] * tokens + 12.0 * layers * h * r["seq"] * tokens
        tflops = flops / r["median"] / 1e12
        rows.append(
            {
                **{k: r[k] for k in ("backend", "model", "mode", "seq", "batch", "predictions")},
                "real_share": r["real_share"],
                "step_ms": r["median"] * 1e3,
                "step_ms_min": r["min"] * 1e3,
                "step_ms_max": r["max"] * 1e3,
                "cpu_ms": r["cpu"] * 1e3,
                "tokens_per_second": tokens / r["median"],
                "real_tokens_per_second": tokens * r["real_share"] / r["median"],
                "model_tflops_per_step": flops / 1e12,
                "tflops_per_second": tflops,
                "peak_tflops": peak,
                "mfu": tflops / peak if peak else None,
                "mfu_6n": flops_6n / r["median"] / 1e12 / peak if peak else None,
                "rounds": r["rounds"],
            }
        )
    return rows


def speed_lines(rows):
    """Ours against keras-hub on the same backend, mode and length (MLM only when it ran; else
    ours with NSP, which does more), and each backend against TensorFlow."""
    ours = "ours MLM" if any(r["model"] == "ours MLM" for r in rows) else "ours MLM+NSP"
    peers = backends.ratio_lines(
        rows,
        lambda r: r["model"] == ours,
        lambda r: r["model"] == "keras-hub MLM",
        ("backend", "mode", "seq"),
        lambda f, s: f"{ours}/keras-hub MLM {f['backend']} {f['mode']} seq {f['seq']}",
    )
    return peers + backends.versus_tensorflow(rows, ("model", "seq"))


def main(argv=None):
    argv, args, names, config = backends.start(
        parse_args,
        argv,
        lambda args, config: (
            f"seq {args.seqs}, batch {args.batches}, masked positions "
            f"{args.predictions}; {args.dtype}, create_optimizer's AdamW"
        ),
    )
    results = backends.run("bench_pretrain_step", names, argv, args.repeat)
    for backend, result in results.items():
        info = result["info"]
        print(
            f"{backend} {info['version']} (keras {info['keras']}) on {info['device']['count']} x "
            f"{info['device']['kind']}; trainable parameters "
            + ", ".join(f"{k} {v / 1e6:.1f}M" for k, v in info["params"].items())
        )
    rows = result_rows(args, config, results)
    table = [
        [
            r["backend"],
            r["model"],
            r["mode"],
            r["seq"],
            r["batch"],
            r["step_ms"],
            r["cpu_ms"],
            r["tokens_per_second"],
            r["real_tokens_per_second"],
            r["tflops_per_second"],
            "" if r["mfu"] is None else f"{r['mfu']:.1%}",
            f"{(r['step_ms_max'] - r['step_ms_min']) / r['step_ms']:.0%}",
        ]
        for r in rows
    ]
    header = ["backend", "model", "mode", "seq", "batch", "ms/step", "cpu ms", "tokens/s"]
    header += ["real tokens/s"]
    print()
    print(common.format_table(header + ["TFLOP/s", "MFU", "spread"], table))
    print()
    lines = speed_lines(rows)
    for line in lines:
        print(line)
    summary = {
        "benchmark": "bench_pretrain_step",
        "size": args.size,
        "dtype": args.dtype,
        "backends": {b: r["info"] for b, r in results.items()},
        "rows": [{k: v for k, v in r.items() if k != "rounds"} for r in rows],
        "speed": lines,
    }
    print(json.dumps(summary), flush=True)  # The results as one JSON line.
    return summary


if __name__ == "__main__":
    common.run_and_record(main, __file__)
