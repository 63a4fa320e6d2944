"""TF Serving's request batching, measured here: `batching_parameters.txt` for `--enable_batching`.

With `--enable_batching`, TF Serving queues single requests, closes a batch when it holds
`max_batch_size` rows or its first request has waited `batch_timeout_micros`, pads it to the
next of `allowed_batch_sizes` (repeating its first row) and runs it on one of
`num_batch_threads` threads; with `max_enqueued_batches` closed batches waiting, new requests
fail at once. `Batcher` does the same in Python around a loaded signature, and `load` drives
a callable with concurrent clients (the bench and the tuner share both).

`tune(function, rows)` measures throughput and latency per batch size and timeout under
concurrent single-row clients and picks the setting with the highest throughput (among those
within 5% of it, the lowest p99 latency); `batching_parameters(...)` writes it in TF
Serving's text format, with the measured table as comments.
"""

import dataclasses
import os
import queue
import statistics
import threading
import time

import numpy as np

PARAMETERS_FILE = "batching_parameters.txt"
# The settings tried: max_batch_size (1: no batching) x batch_timeout_micros.
MAX_BATCH_SIZES = (1, 4, 8, 16, 32)
TIMEOUTS_MICROS = (0, 2000, 10000)
TUNE_SECONDS = 3.0  # Load per setting.
SPREAD = 0.05  # Throughputs this close to the best count as equal; then latency decides.
_NEXT = object()  # Batcher: no task taken yet for the next batch.


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """The fields of TF Serving's BatchingParameters that matter for text models."""

    max_batch_size: int = 1
    batch_timeout_micros: int = 0
    num_batch_threads: int = os.cpu_count() or 1
    max_enqueued_batches: int = 100

    @property
    def allowed_batch_sizes(self):
        """Powers of two below max_batch_size, and max_batch_size (TF Serving wants it last)."""
        sizes = [2**i for i in range(12) if 2**i < self.max_batch_size]
        return sizes + [self.max_batch_size]


class QueueFullError(RuntimeError):
    """A request refused because `max_enqueued_batches` batches are waiting (TF Serving:
    UNAVAILABLE)."""


class Batcher:
    """Runs `function` on batches of concurrent requests, as TF Serving's batching session.

    Args:
        function: callable(**{name: array [B, ...]}) -> {name: tensor [B, ...]}, e.g. a loaded
            SavedModel's `signatures["serving_default"]`.
        options: `BatchingOptions`.

    Call arguments (from any thread):
        **inputs: NumPy arrays [b, ...] of one request.

    Returns:
        {name: NumPy array [b, ...]}, this request's rows of the batch's outputs.
    """

    def __init__(self, function, options):
        self.function, self.options = function, options
        self._tasks = queue.Queue()
        self._batches = queue.Queue(maxsize=options.max_enqueued_batches)
        self._threads = [threading.Thread(target=self._form, daemon=True)] + [
            threading.Thread(target=self._run, daemon=True)
            for _ in range(options.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def __call__(self, **inputs):
        task = {"inputs": inputs, "done": threading.Event()}
        self._tasks.put(task)
        task["done"].wait()
        if "error" in task:
            raise task["error"]
        return task["outputs"]

    def close(self):
        """Stops the batching threads (after the queued work)."""
        self._tasks.put(None)
        for thread in self._threads:
            thread.join()

    def _form(self):
        """Closes batches: full, or the first task's timeout passed."""
        limit, wait = self.options.max_batch_size, self.options.batch_timeout_micros / 1e6
        task = self._tasks.get()
        while task is not None:
            batch, rows, deadline = [task], _rows(task), time.perf_counter() + wait
            task = _NEXT
            while rows < limit:
                try:
                    following = self._tasks.get(timeout=max(deadline - time.perf_counter(), 0))
                except queue.Empty:
                    break
                if following is None or rows + _rows(following) > limit:
                    task = following  # Opens the next batch (or ends the loop).
                    break
                batch.append(following)
                rows += _rows(following)
            try:
                self._batches.put_nowait(batch)
            except queue.Full:
                _fail(batch, QueueFullError("The batch queue is full (max_enqueued_batches)."))
            if task is _NEXT:
                task = self._tasks.get()
        for _ in range(self.options.num_batch_threads):
            self._batches.put(None)

    def _run(self):
        while (batch := self._batches.get()) is not None:
            try:
                outputs = self._call(batch)
            except Exception as e:  # noqa: BLE001 -- every request of the batch gets the error.
                _fail(batch, e)
                continue
            start = 0
            for task in batch:
                stop = start + _rows(task)
                task["outputs"] = {k: v[start:stop] for k, v in outputs.items()}
                task["done"].set()
                start = stop

    def _call(self, batch):
        """Concatenates the requests, pads to the next allowed batch size (repeating the first
        row) and runs the function."""
        names = batch[0]["inputs"]
        inputs = {k: np.concatenate([t["inputs"][k] for t in batch]) for k in names}
        rows = len(next(iter(inputs.values())))
        size = next((s for s in self.options.allowed_batch_sizes if s >= rows), rows)
        padded = {
            k: np.concatenate([v, np.repeat(v[:1], size - rows, axis=0)]) for k, v in inputs.items()
        }
        return {k: np.asarray(v) for k, v in self.function(**padded).items()}


def _rows(task):
    return len(next(iter(task["inputs"].values())))


def _fail(batch, error):
    for task in batch:
        task["error"] = error
        task["done"].set()


def load(call, requests, clients, seconds=None, rounds=None):
    """Drives `call` with `clients` concurrent client threads, each sending requests back to
    back, in turn from `requests` (client i starts at request i).

    Args:
        call: callable(**request) -> outputs.
        requests: list of {input name: NumPy array [b, ...]}.
        clients: int.
        seconds: float: stop sending after this long; or None, with
        rounds: int: each client sends len(requests) * rounds / clients requests (rounded up).

    Returns:
        dict: `seconds` (wall), `rows` and `requests` answered, `latencies` (seconds, per
        request), `failures` (a list of error texts) and `answers` {request index: outputs} of
        the last answer to each request.
    """
    results = {"latencies": [], "failures": [], "answers": {}, "rows": 0}
    lock = threading.Lock()
    per_client = None if rounds is None else -(-len(requests) * rounds // clients)
    start = time.perf_counter()

    def client(i):
        sent = 0
        while (per_client is None and time.perf_counter() - start < seconds) or (
            per_client is not None and sent < per_client
        ):
            index = (i + sent * clients) % len(requests)
            sent += 1
            t0 = time.perf_counter()
            try:
                outputs = call(**requests[index])
            except Exception as e:  # noqa: BLE001 -- counted, reported with its message.
                with lock:
                    results["failures"].append(f"{type(e).__name__}: {e}")
                continue
            latency = time.perf_counter() - t0
            with lock:
                results["latencies"].append(latency)
                results["answers"][index] = outputs
                results["rows"] += len(next(iter(requests[index].values())))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results["seconds"] = time.perf_counter() - start
    results["requests"] = len(results["latencies"])
    return results


def summary(result):
    """Rows/s and latency percentiles (ms) of a `load` result."""
    latencies = np.asarray(result["latencies"]) * 1e3
    p50, p95, p99 = np.percentile(latencies, [50, 95, 99]) if len(latencies) else (np.nan,) * 3
    return {
        "rows_per_s": result["rows"] / result["seconds"],
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "failures": len(result["failures"]),
    }


def tune(function, requests, seconds=TUNE_SECONDS, repeat=1, clients=None, candidates=None):
    """Measures each batching setting under concurrent single-row clients.

    Args:
        function: the signature (callable(**inputs) -> outputs).
        requests: list of single-row requests {input name: array [1, ...]}.
        seconds: float, the load per setting and round.
        repeat: int, rounds over all settings (interleaved); medians over rounds.
        clients: int (default: twice the largest max_batch_size, so batches can fill).
        candidates: list of `BatchingOptions` (default: MAX_BATCH_SIZES x TIMEOUTS_MICROS).

    Returns:
        (best `BatchingOptions`, table: list of (options, summary dict) in candidate order).
    """
    if candidates is None:
        candidates = [BatchingOptions(1, 0)] + [
            BatchingOptions(b, t) for b in MAX_BATCH_SIZES if b > 1 for t in TIMEOUTS_MICROS
        ]
    clients = clients or 2 * max(c.max_batch_size for c in candidates)
    load(function, requests[:2], 1, rounds=1)  # The first call builds the graph: untimed.
    measured = {c: [] for c in candidates}
    for _ in range(repeat):
        for options in candidates:
            if options.max_batch_size == 1:  # Batching off: each request runs on its own.
                measured[options].append(summary(load(function, requests, clients, seconds)))
                continue
            batcher = Batcher(function, options)
            try:
                measured[options].append(summary(load(batcher, requests, clients, seconds)))
            finally:
                batcher.close()
    table = [
        (c, {k: statistics.median(r[k] for r in rounds) for k in rounds[0]})
        for c, rounds in measured.items()
    ]
    return pick(table), table


def pick(table):
    """The setting of highest throughput; among those within SPREAD of it, the lowest p99."""
    usable = [(c, s) for c, s in table if s["failures"] == 0] or table
    best = max(s["rows_per_s"] for _, s in usable)
    close = [(c, s) for c, s in usable if s["rows_per_s"] >= (1 - SPREAD) * best]
    return min(close, key=lambda cs: cs[1]["p99_ms"])[0]


def batching_parameters(options, table=(), clients=None):
    """TF Serving's `--batching_parameters_file` text for `options`, the table as comments.

    (`pad_variable_length_inputs` stays off: the signature's inputs are strings [B] or [B, K],
    with no dimension but the batch's to pad.)"""
    lines = [
        "# TF Serving batching for this export: tensorflow_model_server --enable_batching "
        "--batching_parameters_file=<this file>.",
    ]
    if table:
        lines.append(
            f"# Chosen from measured single-row requests from {clients} concurrent clients on "
            f"{os.cpu_count()} CPUs (keras_bert.export.batching.tune):"
        )
        lines.append("# max_batch_size timeout_us  rows/s  p50_ms  p95_ms  p99_ms  failures")
        for c, s in table:
            lines.append(
                f"# {c.max_batch_size:14d} {c.batch_timeout_micros:10d} {s['rows_per_s']:7.1f} "
                f"{s['p50_ms']:7.1f} {s['p95_ms']:7.1f} {s['p99_ms']:7.1f} {s['failures']:9.0f}"
            )
    lines += [
        f"max_batch_size {{ value: {options.max_batch_size} }}",
        f"batch_timeout_micros {{ value: {options.batch_timeout_micros} }}",
        f"num_batch_threads {{ value: {options.num_batch_threads} }}",
        f"max_enqueued_batches {{ value: {options.max_enqueued_batches} }}",
    ]
    lines += [f"allowed_batch_sizes: {s}" for s in options.allowed_batch_sizes]
    lines.append("pad_variable_length_inputs: false")
    return "\n".join(lines) + "\n"
