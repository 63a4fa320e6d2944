"""Serving under load: throughput and p50/p95/p99 latency against concurrent clients and batch size.

The model is the real all-MiniLM-L6-v2 fine-tuned on MRPC (`--model_dir`, a fine-tuning run's
`model/`, by default runs/mrpc/model, which `make bench-model` makes; copied and exported with
`--tune_batching`). The requests are real text pairs in a realistic mix of lengths (from `--data`,
the real data folder): `--short` (0.8) of them SST-2 dev sentences paired with the next one, the
rest SQuAD v1.1 dev questions paired with their paragraph (truncated to seq_length 128), in
requests of `--batch` rows (1 and 8), shuffled with a fixed seed.

Each client sends its requests back to back (closed loop) for `--seconds`; `--clients` of them at
once (1, 2, 4, 8). Peers, in one process, driven the way TF Serving drives a model:

- ours: the exported SavedModel loaded once (`tf.saved_model.load`), its `serving_default`
  called from every client thread at once: TF Serving's one session per model, run by
  concurrent requests, with its default threads (tensorflow_intra_op_parallelism and
  tensorflow_inter_op_parallelism 0: TensorFlow's defaults, here as `tf.config.threading`).
- ours + batching (single-row requests): the same behind `keras_bert.export.batching.Batcher`
  with the export's measured `batching_parameters.txt` (TF Serving's `--enable_batching`).
- keras-hub: `BertTextClassifierPreprocessor` + `BertTextClassifier` (its BertTokenizer,
  sequence_length 128) holding the same weights, in one `tf.function`, called the same way.
- with `--url http://host:8501/v1/models/mrpc:predict`: a running TF Serving's REST endpoint
  (row format), instead of the in-process peers.

Every answer is checked: no request may fail, and each request's answer must equal (bit for bit;
with batching, the same labels and probabilities within 1e-5) the one a single client got.
Rounds (`--repeat`) interleave peers and settings; the table gives medians over rounds and the
spread (max - min) / median of throughput. A plot goes to `--plot`.

    .venv/bin/python bench/bench_serving_load.py [--clients 1,2,4,8] [--batch 1,8] [--seconds 5]
        [--repeat 3] [--model_dir runs/mrpc/model] [--data ../shared/data] [--url URL] [--no-hub]
        [--plot bench/out/serving_load.png]
"""

import base64
import csv
import json
import os
import shutil
import statistics
import tempfile
import urllib.request

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402

from keras_bert.export import batching  # noqa: E402


def read_pairs(data, short_share, seed=0):
    """Real (text, text_b) pairs: SST-2 dev sentence + the next one (short), SQuAD dev question +
    its paragraph (long), mixed `short_share` : 1 - short_share and shuffled."""
    with open(os.path.join(data, "sst2", "dev.tsv"), encoding="utf-8") as f:
        sentences = [row[0] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]
    short = list(zip(sentences, sentences[1:] + sentences[:1]))
    with open(os.path.join(data, "squad_v1.1", "dev-v1.1.json"), encoding="utf-8") as f:
        articles = json.load(f)["data"]
    long = [
        (qa["question"], paragraph["context"])
        for article in articles
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"][:1]
    ]
    rng = np.random.default_rng(seed)
    n_long = round(len(short) * (1 - short_share) / short_share)
    pairs = short + [long[i] for i in rng.choice(len(long), n_long, replace=False)]
    return [pairs[i] for i in rng.permutation(len(pairs))]


def make_requests(pairs, batch):
    """Requests of `batch` rows: {"text": [b], "text_b": [b]} NumPy object arrays."""
    return [
        {
            "text": np.array([a for a, _ in pairs[i : i + batch]], dtype=object),
            "text_b": np.array([b for _, b in pairs[i : i + batch]], dtype=object),
        }
        for i in range(0, len(pairs) - batch + 1, batch)
    ]


def export(model_dir, directory, pairs):
    """Copies the model dir and exports it (warmup records and measured batching on the real
    `pairs`); returns the version directory."""
    from keras_bert.export import export_saved_model

    copy = shutil.copytree(model_dir, os.path.join(directory, "model"))
    return export_saved_model(
        copy, os.path.join(directory, "serving"), warmup_texts=pairs, tune_batching=True
    )


def read_batching(path):
    """The `BatchingOptions` of an export's batching_parameters.txt."""
    with open(os.path.join(path, "assets.extra", batching.PARAMETERS_FILE)) as f:
        values = {}
        for line in f:
            if not line.startswith("#") and "value:" in line:
                name, value = line.split("{")
                values[name.strip()] = int(value.split(":")[1].strip(" }\n"))
    return batching.BatchingOptions(
        values["max_batch_size"],
        values["batch_timeout_micros"],
        values["num_batch_threads"],
        values["max_enqueued_batches"],
    )


def probabilities_of(signature):
    """The SavedModel's serving_default -> callable(text, text_b) -> {"probabilities": array}."""
    return lambda text, text_b: {
        "probabilities": np.asarray(signature(text=text, text_b=text_b)["probabilities"])
    }


def keras_hub_peer(model_dir):
    """keras-hub's preprocessor + BertTextClassifier, the fine-tuned weights, one tf.function."""
    import tensorflow as tf
    from bench_serving import keras_hub_classifier

    from keras_bert.checkpoints.task_model import load_task_model
    from keras_bert.text.vocab import load_vocabulary

    model, info, vocab_file = load_task_model(model_dir)
    vocabulary = load_vocabulary(vocab_file)
    preprocessor, classifier = keras_hub_classifier(
        model, vocabulary, info["lower_case"], info["seq_length"]
    )
    call = tf.function(
        lambda text, text_b: tf.nn.softmax(
            classifier(preprocessor(x=(text, text_b)), training=False)
        )
    )
    return lambda text, text_b: {"probabilities": np.asarray(call(text, text_b))}


def rest_peer(url):
    """A TF Serving REST predict endpoint (row format) -> callable(text, text_b)."""

    def call(text, text_b):
        instances = [
            {"text": {"b64": _b64(a)}, "text_b": {"b64": _b64(b)}} for a, b in zip(text, text_b)
        ]
        body = json.dumps({"signature_name": "serving_default", "instances": instances})
        request = urllib.request.Request(
            url, body.encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            predictions = json.load(response)["predictions"]
        return {"probabilities": np.array([p["probabilities"] for p in predictions], np.float32)}

    return call


def _b64(text):
    data = text.encode("utf-8") if isinstance(text, str) else text
    return base64.b64encode(data).decode("ascii")


def check_answers(name, result, reference, exact):
    """Zero failures and every answer equal to the single client's: returns the max abs
    difference; raises AssertionError otherwise."""
    if result["failures"]:
        raise AssertionError(f"{name}: {len(result['failures'])} failed: {result['failures'][0]}")
    worst = 0.0
    for index, outputs in result["answers"].items():
        got, want = outputs["probabilities"], reference[index]["probabilities"]
        same = np.array_equal(got, want) if exact else np.allclose(got, want, atol=1e-5, rtol=0)
        if not same or not np.array_equal(got.argmax(-1), want.argmax(-1)):
            raise AssertionError(f"{name}: request {index} answered differently under load.")
        worst = max(worst, float(np.abs(got - want).max()))
    return worst


def peers(args, directory, pairs):
    """name -> (callable(text, text_b) for every request batch, or None where it does not
    apply), and the export's batching options."""
    import tensorflow as tf

    if args.url:
        return {"TF Serving REST": rest_peer(args.url)}, None
    path = export(args.model_dir, directory, pairs)
    signature = tf.saved_model.load(path).signatures["serving_default"]
    ours = probabilities_of(signature)
    options = read_batching(path)
    with open(os.path.join(path, "assets.extra", batching.PARAMETERS_FILE)) as f:
        print(f"the export's {batching.PARAMETERS_FILE}:\n{f.read()}", flush=True)
    found = {"ours": ours}
    if options.max_batch_size > 1:
        found["ours + batching"] = batching.Batcher(ours, options)
    if not args.no_hub:
        found["keras-hub"] = keras_hub_peer(args.model_dir)
    return found, options


def run(args, callables, request_sets):
    """Rounds over batch sizes, client counts and peers (interleaved); returns
    {(peer, batch, clients): [summary per round]} and the max abs answer differences."""
    measured, differences = {}, {}
    references = {}
    for name, call in callables.items():  # One client, every request once: the reference.
        for batch, requests in request_sets.items():
            if name == "ours + batching" and batch > 1:
                continue
            batching.load(call, requests[:2], 1, rounds=1)  # The first call: untimed.
            references[name, batch] = batching.load(call, requests, 1, rounds=1)["answers"]
    for round_index in range(args.repeat):
        for batch, requests in request_sets.items():
            for clients in args.clients:
                for name, call in callables.items():
                    if (name, batch) not in references:
                        continue
                    result = batching.load(call, requests, clients, seconds=args.seconds)
                    key = (name, batch, clients)
                    difference = check_answers(
                        str(key), result, references[name, batch], name != "ours + batching"
                    )
                    differences[key] = max(differences.get(key, 0.0), difference)
                    summary = batching.summary(result)
                    measured.setdefault(key, []).append(summary)
                    print(
                        f"  round {round_index + 1}: {name:16s} batch {batch:2d} clients "
                        f"{clients}: {summary['rows_per_s']:7.1f} rows/s, p50 "
                        f"{summary['p50_ms']:7.1f} ms, p99 {summary['p99_ms']:7.1f} ms",
                        flush=True,
                    )
    return measured, differences


def table(measured, differences):
    rows = []
    for (name, batch, clients), rounds in measured.items():
        rate = [r["rows_per_s"] for r in rounds]
        rows.append(
            [
                name,
                batch,
                clients,
                statistics.median(rate),
                f"{(max(rate) - min(rate)) / statistics.median(rate):.0%}",
                statistics.median(r["p50_ms"] for r in rounds),
                statistics.median(r["p95_ms"] for r in rounds),
                statistics.median(r["p99_ms"] for r in rounds),
                sum(r["failures"] for r in rounds),
                f"{differences[name, batch, clients]:.1g}",
            ]
        )
    header = ["peer", "batch", "clients", "rows/s", "spread", "p50 ms", "p95 ms", "p99 ms"]
    return header + ["failures", "max |diff|"], sorted(rows, key=lambda r: (r[1], r[0], r[2]))


def ratios(measured, peer="keras-hub"):
    """Lines "ours/peer at batch b, c clients: median of the per-round throughput ratios"."""
    lines = []
    for (name, batch, clients), rounds in sorted(measured.items(), key=lambda kv: kv[0][1:]):
        if name != "ours" or (peer, batch, clients) not in measured:
            continue
        per_round = [
            o["rows_per_s"] / p["rows_per_s"]
            for o, p in zip(rounds, measured[peer, batch, clients])
        ]
        lines.append(
            f"throughput ours/{peer}, batch {batch}, {clients} clients: "
            f"{statistics.median(per_round):.2f}x (rounds "
            + " ".join(f"{r:.2f}" for r in per_round)
            + ")"
        )
    return lines


def plot(path, rows):
    """Throughput and p99 latency against clients, one line per peer and batch size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key in sorted({(r[0], r[1]) for r in rows}):
        mine = [r for r in rows if (r[0], r[1]) == key]
        label = f"{key[0]}, batch {key[1]}"
        left.plot([r[2] for r in mine], [r[3] for r in mine], marker="o", label=label)
        right.plot([r[2] for r in mine], [r[7] for r in mine], marker="o", label=label)
    clients = sorted({r[2] for r in rows})
    for ax, ylabel in ((left, "rows/s (median of rounds)"), (right, "p99 latency, ms")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(clients, [str(c) for c in clients])
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    right.set_yscale("log")
    left.legend(fontsize=8)
    fig.suptitle("MRPC MiniLM-L6 serving_default under load (real SST-2 / SQuAD pairs)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n")[0])
    common.add_model_arg(parser, "A fine-tuned MRPC classifier's model/")
    parser.add_argument(
        "--data",
        default=common.DATA,
        help="The folder of sst2/dev.tsv and squad_v1.1/dev-v1.1.json (default: the real data "
        "folder, %(default)s).",
    )
    parser.add_argument("--clients", default="1,2,4,8")
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--short", type=float, default=0.8)
    parser.add_argument(
        "--requests", type=int, default=160, help="Distinct requests per batch size (cycled)."
    )
    parser.add_argument("--url", default=None, help="A TF Serving REST predict URL instead.")
    parser.add_argument("--no-hub", action="store_true", help="Leave keras-hub out.")
    parser.add_argument("--plot", default="bench/out/serving_load.png")
    args = parser.parse_args(argv)
    args.clients = [int(c) for c in args.clients.split(",")]
    for parts in (("sst2", "dev.tsv"), ("squad_v1.1", "dev-v1.1.json")):
        common.require_data(os.path.join(args.data, *parts), "--data")
    if not args.url:
        common.require_model(args.model_dir)
    return args


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(0)  # TF Serving's defaults.
    tf.config.threading.set_inter_op_parallelism_threads(0)
    pairs = read_pairs(args.data, args.short)
    request_sets = {
        int(b): make_requests(pairs, int(b))[: args.requests] for b in args.batch.split(",")
    }
    print(
        f"{len(pairs)} real pairs ({args.short:.0%} SST-2 sentence pairs, the rest SQuAD "
        f"question + paragraph); {os.cpu_count()} CPUs, TF {tf.__version__}, "
        f"intra/inter-op threads 0 "
        f"(TensorFlow's default, as TF Serving's); closed-loop clients, {args.seconds:g} s per "
        f"setting, {args.repeat} interleaved rounds",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as directory:
        callables, _ = peers(args, directory, pairs)
        try:
            measured, differences = run(args, callables, request_sets)
        finally:
            for call in callables.values():
                if isinstance(call, batching.Batcher):
                    call.close()
    header, rows = table(measured, differences)
    print()
    print(common.format_table(header, rows))
    print()
    print("\n".join(ratios(measured)))
    if args.plot:
        plot(args.plot, rows)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    common.run_and_record(main, __file__)
