"""One benchmark on several Keras backends in one run: a worker process per backend, rounds
interleaved by the parent.

Keras fixes its backend when it is first imported, so each backend runs in its own process
(`KERAS_BACKEND` set). The parent starts the workers one after the other (each builds and
compiles its cases alone, so compile time does not disturb another's timing), then asks them in
turn for a round: a worker times each of its cases once per round (cases interleaved) and sends
the `common.time_call` results back as a JSON line. While one worker times, the others wait on
their standard input, so the backends' rounds interleave in time and per-round ratios between
backends compare runs made under the same load.

Parent:  results = run("bench_encoder", ["tensorflow", "jax"], argv, repeat=3)
Worker:  the benchmark module's `worker(argv)` builds its cases and calls `serve(...)`;
         `python bench/backends.py <module> <argv...>` runs it (what the parent starts).
"""

import importlib
import importlib.util
import json
import os
import subprocess
import sys

BACKENDS = ("tensorflow", "jax", "torch")
MARK = "BENCH_WORKER_JSON "  # Prefix of the lines a worker sends to the parent.
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_backends(text):
    """`--backend` value -> list of backend names.

    Args:
        text: str. Comma-separated names from `BACKENDS`, or "all" (those installed).

    Returns:
        list of str, in the order given.

    Raises:
        ValueError: an unknown backend, a repeated one, or one whose package is not installed.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return [b for b in BACKENDS if _installed(b)]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise ValueError(
            f"--backend takes a comma-separated list of {BACKENDS} or 'all', got {text!r}."
        )
    if len(set(names)) != len(names):
        raise ValueError(f"--backend names a backend twice: {text!r}.")
    missing = [n for n in names if not _installed(n)]
    if missing:
        raise ValueError(
            f"--backend {','.join(missing)}: not installed in this Python ({sys.executable})."
        )
    return names


def _installed(backend):
    return importlib.util.find_spec(backend) is not None


class _Worker:
    """One worker process of `module` on `backend`, talking JSON lines over its pipes."""

    def __init__(self, module, backend, argv):
        env = dict(os.environ, KERAS_BACKEND=backend)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self.backend = backend
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "backends.py"), module, *argv],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def ask(self, command=None):
        """Sends `command` (if any) and returns the next JSON message; the worker's other lines
        are printed, prefixed with its backend."""
        if command is not None:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK) :])
            print(f"  [{self.backend}] {line.rstrip()}", flush=True)
        code = self.process.wait()
        raise RuntimeError(f"The {self.backend} worker exited ({code}) before answering.")

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def run(module, backends, argv, repeat):
    """Runs `module`'s worker on each backend and times `repeat` interleaved rounds.

    Args:
        module: str. A module in bench/ with a `worker(argv)` function that calls `serve`.
        backends: list of str (see `parse_backends`).
        argv: list of str. The command line each worker parses (the benchmark's own flags).
        repeat: int. Rounds; the workers' order alternates from round to round.

    Returns:
        dict backend -> {"info": what the worker said when ready, "cases": list of case keys
        (dicts), "rounds": list over cases of lists over rounds of `common.time_call` results,
        "final": what the worker's `finish` returned}.
    """
    workers, results = [], {}
    try:
        for backend in backends:  # One at a time: compilation alone on the machine.
            worker = _Worker(module, backend, argv)
            workers.append(worker)
            ready = worker.ask()
            results[backend] = {
                "info": ready["info"],
                "cases": ready["cases"],
                "rounds": [[] for _ in ready["cases"]],
            }
        for index in range(repeat):
            for worker in workers if index % 2 == 0 else workers[::-1]:
                timed = worker.ask("round")["round"]
                for case_rounds, t in zip(results[worker.backend]["rounds"], timed):
                    case_rounds.append(t)
        for worker in workers:
            results[worker.backend]["final"] = worker.ask("finish")["final"]
            worker.process.wait()
    finally:
        for worker in workers:
            worker.close()
    return results


def send(message):
    """Worker side: one JSON message to the parent."""
    print(MARK + json.dumps(message), flush=True)


def serve(cases, info, iters, finish=None):
    """Worker side: says it is ready, then times a round of `cases` per "round" asked.

    Args:
        cases: list of dicts with `key` (a JSON-able dict naming the case) and `call` (a
            function of no arguments running it once; its result is fetched to sync).
        info: JSON-able dict sent with "ready" (versions, sizes, measured peaks...).
        iters: int. Timed calls per case and round, after one untimed call.
        finish: optional function of no arguments returning a JSON-able dict, sent last.
    """
    import common

    send({"info": info, "cases": [case["key"] for case in cases]})
    for line in sys.stdin:
        command = line.strip()
        if command == "round":
            timed = [common.time_call(case["call"], warmup=1, iters=iters) for case in cases]
            for case, t in zip(cases, timed):
                label = " ".join(str(v) for v in case["key"].values())
                print(
                    f"{label}: {t['median'] * 1e3:.1f} ms (min {t['min'] * 1e3:.1f}, max "
                    f"{t['max'] * 1e3:.1f}, cpu {t['cpu'] * 1e3:.1f})",
                    flush=True,
                )
            send({"round": timed})
        elif command == "finish":
            send({"final": finish() if finish else {}})
            return
        else:
            raise ValueError(f"Unknown worker command {command!r}.")


def cases_table(results):
    """`run`'s results -> one list of rows: dicts with `backend`, the case key's fields, the
    per-round results (`rounds`) and `common.summarize_rounds`' median, min, max and cpu."""
    import common

    rows = []
    for backend, result in results.items():
        for key, rounds in zip(result["cases"], result["rounds"]):
            rows.append(
                {"backend": backend, **key, "rounds": rounds, **common.summarize_rounds(rounds)}
            )
    return rows


def start(parse_args, argv, details):
    """The start of a benchmark's `main`: parses `argv` (None: the command line), prints what
    runs (BERT size, `details(args, config)`, backends, CPUs and load).

    Returns:
        (argv, args, backend names, BertConfig of `args.size`).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)  # --help answers before Keras loads.
    names = parse_backends(args.backend)
    from keras_bert.config import BertConfig

    config = BertConfig.preset(args.size)
    print(
        f"BERT {args.size}: L={config.num_hidden_layers} H={config.hidden_size} "
        f"V={config.vocab_size}; {details(args, config)}; backends {', '.join(names)}; "
        f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    return argv, args, names, config


def ratio_lines(rows, fast, slow, same, label):
    """ "speed ..." lines: how many times faster each `fast` row is than each `slow` row with the
    same `same` fields, per round (`common.ratio_text`).

    Args:
        rows: `cases_table` rows.
        fast: function(row) -> bool, the rows measured.
        slow: function(row) -> bool, the rows they are compared with.
        same: tuple of str, fields that must be equal (e.g. ("backend", "dtype", "mode")).
        label: function(fast_row, slow_row) -> str.

    Returns:
        list of str.
    """
    import common

    return [
        f"speed {label(f, s)}: " + common.ratio_text(s["rounds"], f["rounds"])
        for f in rows
        if fast(f)
        for s in rows
        if slow(s) and all(f[k] == s[k] for k in same)
    ]


def versus_tensorflow(rows, same):
    """`ratio_lines` of each other backend's rows against the TensorFlow rows (every mode) with
    the same `same` fields (e.g. model and dtype)."""
    return ratio_lines(
        rows,
        lambda r: r["backend"] != "tensorflow",
        lambda r: r["backend"] == "tensorflow",
        same,
        lambda f, s: (
            f"{f['backend']} {f['mode']}/tensorflow {s['mode']} "
            + " ".join(str(f[k]) for k in same)
        ),
    )


# === Worker side: compiling and syncing on the current backend ===


def compile_modes():
    """The ways the current Keras backend runs a function: name -> tf.function's jit_compile
    (TensorFlow: graph and XLA), or None (JAX: jax.jit, always XLA; PyTorch: eager)."""
    import keras

    return {
        "tensorflow": {"graph": False, "xla": True},
        "jax": {"jit": None},
        "torch": {"eager": None},
    }[keras.config.backend()]


def compile_forward(model, fn, mode):
    """`fn(inputs)` (which calls `model`) compiled the current backend's way (`compile_modes`).

    TensorFlow: tf.function; JAX: jax.jit of the model's stateless call, its weights passed in
    as arguments (not baked into the program as constants); PyTorch: eager, under no_grad.

    Returns:
        function(inputs) -> fn's result, computed (JAX: blocked until ready; PyTorch: None).
    """
    import keras

    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=compile_modes()[mode])
    if backend == "jax":
        import jax

        trainable = [v.value for v in model.trainable_variables]
        frozen = [v.value for v in model.non_trainable_variables]

        @jax.jit
        def stateless(trainable, frozen, inputs):
            mapping = list(zip(model.trainable_variables, trainable))
            mapping += list(zip(model.non_trainable_variables, frozen))
            with keras.StatelessScope(state_mapping=mapping):
                return fn(inputs)

        return lambda inputs: jax.block_until_ready(stateless(trainable, frozen, inputs))
    import torch

    def eager(inputs):
        with torch.no_grad():
            fn(inputs)

    return eager


def to_numpy(x):
    """A tensor of any backend as a float32 NumPy array."""
    import keras

    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def matmul_roofline(dtype="float32", n=2048, iters=8):
    """Measured GFLOP/s of a square [n, n] x [n, n] matmul on the current backend, compiled as
    its benchmarks are (TensorFlow: `common.matmul_roofline`'s tf.function; JAX: jax.jit;
    PyTorch: eager): the best of `iters` runs."""
    import common
    import keras

    backend = keras.config.backend()
    if backend == "tensorflow":
        return common.matmul_roofline(dtype, n, iters)
    a = keras.random.normal((n, n), seed=1, dtype=dtype)
    b = keras.random.normal((n, n), seed=2, dtype=dtype)
    if backend == "jax":
        import jax

        fn = jax.jit(keras.ops.matmul)

        def call():
            return jax.block_until_ready(fn(a, b))

    else:

        def call():
            keras.ops.matmul(a, b)  # Eager on the CPU: done when it returns.

    seconds = common.time_call(call, warmup=2, iters=iters)["min"]
    return 2.0 * n**3 / seconds / 1e9


def _worker_main(argv):
    if os.environ.get("KERAS_BACKEND") != "tensorflow":
        import tensorflow as tf  # Imported by the benchmarks for tf.data and helpers only:

        tf.config.set_visible_devices([], "GPU")  # the GPUs stay the backend's.
    module = importlib.import_module(argv[0])
    module.worker(argv[1:])


if __name__ == "__main__":
    _worker_main(sys.argv[1:])
