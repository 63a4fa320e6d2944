"""Soak: mixed traffic on every kind of served model for `--minutes`; memory must stay flat.

One process serves, as TF Serving would, a SavedModel of every task kind at once: sentence and pair
classification, regression, NER, SWAG, SQuAD v1.1 and v2.0, a pre-trained encoder (tiny random BERTs
on the real uncased vocabulary, seq_length 128), and the real MiniLM MRPC model (`--model_dir`; by
default runs/mrpc/model when it exists, which `make bench-model` makes). Each model is loaded and
its warmup records replayed as TF Serving does at load. Then `--clients` concurrent clients send
requests back to back: a random model, 1 to 4 rows, each text drawn from a mix of real lengths
(SST-2 sentences, CoNLL-2003 sentences, SQuAD paragraphs and questions from `--data`, the real data
folder): 4% empty, 60% a sentence, 30% a paragraph, 5% 10-100 KB, 1% a 1 MB text (real text
repeated).

Resident memory (/proc/self/statm) is sampled every `--sample` seconds. The first `--settle`
share of the run (at least every model once with a 1 MB text, which the warmup phase sends
first) is warmup; the growth is the median RSS of the last minute over the median of the
first minute after warmup. The run passes with zero failed requests and growth below
`--max_growth` (5%). A JSON summary goes to `--out` (and the RSS curve to a PNG beside it).

    nice -n 10 .venv/bin/python bench/soak_serving.py --minutes=60 [--clients 4] [--no-minilm]
        [--out bench/out/soak.json]
"""

import csv
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402

# The real data folder's files the soak reads (relative to --data).
INPUTS = (
    ("sst2", "dev.tsv"),
    ("conll2003", "dev.txt"),
    ("squad_v1.1", "dev-v1.1.json"),
    ("bert_uncased", "vocab.txt"),
)
TINY = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=128,
)
TASKS = {  # registry task -> task options
    "sst2": {},
    "mnli": {},
    "stsb": {},
    "conll2003": {},
    "swag": {},
    "squad1": dict(doc_stride=64, max_query_length=32),
    "squad2": dict(doc_stride=64, max_query_length=32),
}
MEGABYTE = 1 << 20


def write_models(directory, vocabulary):
    """Tiny random models of every task kind (and a pre-trained encoder checkpoint) on the real
    vocabulary: {name: model dir}."""
    import tensorflow as tf

    import keras_bert
    from keras_bert import checkpoints
    from keras_bert.checkpoints.task_model import save_task_model
    from keras_bert.tasks.config import FinetuneConfig

    dirs = {}
    for seed, (task, options) in enumerate(TASKS.items()):
        config = FinetuneConfig(
            task=task,
            init_checkpoint="unused",
            model_dir=os.path.join(directory, task),
            do_eval=True,
            seq_length=128,
            task_options=options,
        )
        tf.keras.utils.set_random_seed(seed)
        encoder = keras_bert.BertEncoder(keras_bert.BertConfig(vocab_size=len(vocabulary), **TINY))
        model = config.task_object.build_model(encoder, dropout=0.1)
        dirs[task] = save_task_model(
            model, os.path.join(directory, task, "model"), config.task_object, 128, vocabulary, True
        )
    pretrainer = keras_bert.BertPretrainer(
        keras_bert.BertEncoder(keras_bert.BertConfig(vocab_size=len(vocabulary), **TINY))
    )
    dirs["encoder"] = os.path.join(directory, "uncased_L-2_H-32_A-2")
    checkpoints.save(pretrainer, dirs["encoder"], format="google", vocab=vocabulary)
    return dirs


def read_texts(data):
    """Real texts by kind: `sentence` (SST-2, CoNLL-2003), `paragraph` and `question` (SQuAD)."""
    with open(os.path.join(data, "sst2", "dev.tsv"), encoding="utf-8") as f:
        sentences = [row[0] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]
    with open(os.path.join(data, "conll2003", "dev.txt"), encoding="utf-8") as f:
        words, conll = [], []
        for line in f:
            if line.strip() and not line.startswith("-DOCSTART-"):
                words.append(line.split()[0])
            elif words:
                conll.append(" ".join(words))
                words = []
    with open(os.path.join(data, "squad_v1.1", "dev-v1.1.json"), encoding="utf-8") as f:
        paragraphs = [p for a in json.load(f)["data"] for p in a["paragraphs"]]
    return {
        "sentence": sentences + conll,
        "paragraph": [p["context"] for p in paragraphs],
        "question": [qa["question"] for p in paragraphs for qa in p["qas"]],
    }


class Traffic:
    """Random requests for a model's serving_default, texts of the soak's length mix."""

    def __init__(self, texts, seed):
        self.texts, self.rng = texts, np.random.default_rng(seed)
        self.corpus = " ".join(texts["paragraph"])

    def text(self, size=None):
        """One text: empty, a sentence, a paragraph, 10-100 KB or 1 MB (`size` forces one)."""
        kind = size or self.rng.choice(
            ["empty", "sentence", "paragraph", "long", "megabyte"], p=[0.04, 0.6, 0.3, 0.05, 0.01]
        )
        if kind == "empty":
            return ""
        if kind in ("sentence", "paragraph"):
            pool = self.texts[kind]
            return pool[self.rng.integers(len(pool))]
        length = MEGABYTE if kind == "megabyte" else int(self.rng.integers(10_000, 100_000))
        start = int(self.rng.integers(len(self.corpus)))
        repeated = self.corpus[start:] + " " + self.corpus
        return (repeated * (length // len(repeated) + 1))[:length]

    def request(self, columns, rows=None, size=None):
        """{input: strings [B] or [B, K]} for the signature's text columns."""
        rows = rows or int(self.rng.integers(1, 5))
        request = {}
        for name, k in columns.items():
            if name == "question":
                pool = self.texts["question"]
                values = [pool[self.rng.integers(len(pool))] for _ in range(rows)]
            else:
                values = [
                    [self.text(size) for _ in range(k)] if k > 1 else self.text(size)
                    for _ in range(rows)
                ]
            request[name] = np.array(values, dtype=object)
        return request


def resident_bytes():
    """This process's resident memory (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def load_models(paths):
    """name -> (serving_default, its text columns), each warmed up with its records as TF
    Serving does at load."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    from keras_bert.export import warmup

    served = {}
    for name, path in paths.items():
        signature = tf.saved_model.load(path).signatures["serving_default"]
        records = tf.data.TFRecordDataset(os.path.join(path, "assets.extra", warmup.WARMUP_FILE))
        for record in records:
            inputs = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log
            signature(**{k: tf.make_ndarray(v) for k, v in inputs.request.inputs.items()})
        specs = signature.structured_input_signature[1]
        columns = {k: 1 if s.shape.rank == 1 else int(s.shape[1]) for k, s in specs.items()}
        served[name] = (signature, columns)
    return served


def soak(served, traffic, clients, seconds, sample_seconds, progress=60.0):
    """Clients sending random requests to random models for `seconds`; returns (samples
    [(seconds, rss bytes)], counts {model: requests}, failures [text])."""
    names = sorted(served)
    counts, failures, samples = dict.fromkeys(names, 0), [], []
    lock, start = threading.Lock(), time.perf_counter()
    done = threading.Event()

    def client(i):
        rng = np.random.default_rng(1000 + i)
        while time.perf_counter() - start < seconds:
            name = names[rng.integers(len(names))]
            signature, columns = served[name]
            with lock:
                request = traffic.request(columns)
            try:
                outputs = signature(**request)
                for value in outputs.values():
                    value.numpy()
            except Exception as e:  # noqa: BLE001 -- a failed request, counted and reported.
                with lock:
                    failures.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
                continue
            with lock:
                counts[name] += 1

    def sampler():
        last = 0.0
        while not done.wait(sample_seconds):
            now = time.perf_counter() - start
            samples.append((now, resident_bytes()))
            if now - last >= progress:
                last = now
                print(
                    f"  {now / 60:5.1f} min: {sum(counts.values())} requests, "
                    f"{len(failures)} failed, RSS {samples[-1][1] / MEGABYTE:.0f} MB",
                    flush=True,
                )

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    watcher = threading.Thread(target=sampler)
    for thread in threads + [watcher]:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    watcher.join()
    return samples, counts, failures


def growth(samples, settle_seconds, window=60.0):
    """(baseline, final, growth): median RSS of the first `window` seconds after
    `settle_seconds` and of the last `window` seconds."""
    end = samples[-1][0]
    window = min(window, (end - settle_seconds) / 2)
    first = [r for t, r in samples if settle_seconds <= t < settle_seconds + window]
    last = [r for t, r in samples if t >= end - window]
    baseline, final = statistics.median(first), statistics.median(last)
    return baseline, final, final / baseline - 1


def plot(path, samples, settle_seconds):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([t / 60 for t, _ in samples], [r / MEGABYTE for _, r in samples])
    ax.axvline(settle_seconds / 60, color="tab:red", linestyle="--", label="end of warmup")
    ax.set_xlabel("minutes")
    ax.set_ylabel("resident memory, MB")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def export_all(directory, args):
    """Exports every model; returns {name: version dir}."""
    from keras_bert.export import export_saved_model
    from keras_bert.text.vocab import load_vocabulary

    vocabulary = load_vocabulary(os.path.join(args.data, "bert_uncased", "vocab.txt"))
    dirs = write_models(os.path.join(directory, "models"), vocabulary)
    if args.model_dir:
        dirs["mrpc (MiniLM)"] = shutil.copytree(args.model_dir, os.path.join(directory, "mrpc"))
    return {
        name: export_saved_model(model_dir, os.path.join(directory, "serving", str(i)))
        for i, (name, model_dir) in enumerate(dirs.items())
    }


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--settle", type=float, default=0.1, help="Share of the run that warms up.")
    parser.add_argument("--sample", type=float, default=2.0, help="Seconds between RSS samples.")
    parser.add_argument("--max_growth", type=float, default=0.05)
    parser.add_argument(
        "--data",
        default=common.DATA,
        help="The folder of sst2/, conll2003/, squad_v1.1/ and bert_uncased/ (default: the real "
        "data folder, %(default)s).",
    )
    parser.add_argument(
        "--model_dir",
        help="A fine-tuned MRPC classifier's model/, served too (default: "
        f"{common.MRPC_MODEL} when it exists, which {common.mrpc_model_command()} makes).",
    )
    parser.add_argument("--no-minilm", action="store_true", help="Serve the tiny models only.")
    parser.add_argument("--out", default="bench/out/soak.json")
    args = parser.parse_args(argv)
    for parts in INPUTS:
        common.require_data(os.path.join(args.data, *parts), "--data")
    if args.no_minilm:
        args.model_dir = None
    elif args.model_dir:
        common.require_model(args.model_dir)
    elif os.path.exists(common.MRPC_MODEL):
        args.model_dir = common.MRPC_MODEL
    return args


def main(argv=None):
    args = parse_args(argv)
    traffic = Traffic(read_texts(args.data), seed=0)
    with tempfile.TemporaryDirectory() as directory:  # Kept while the models are served.
        served = load_models(export_all(directory, args))
        began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        for signature, columns in served.values():  # Every model sees a 1 MB text first.
            signature(**traffic.request(columns, rows=1, size="megabyte"))
        seconds, settle = args.minutes * 60, args.minutes * 60 * args.settle
        print(
            f"soak: {len(served)} models ({', '.join(served)}), {args.clients} clients, "
            f"{args.minutes:g} min from {began}, {os.cpu_count()} CPUs",
            flush=True,
        )
        samples, counts, failures = soak(served, traffic, args.clients, seconds, args.sample)
    baseline, final, grew = growth(samples, settle)
    summary = dict(
        began=began,
        minutes=args.minutes,
        clients=args.clients,
        requests=counts,
        failures=failures[:20],
        failed=len(failures),
        rss_baseline_mb=baseline / MEGABYTE,
        rss_final_mb=final / MEGABYTE,
        rss_max_mb=max(r for _, r in samples) / MEGABYTE,
        growth=grew,
        passed=not failures and grew < args.max_growth,
    )
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(summary, samples=samples), f)
    plot(os.path.splitext(args.out)[0] + ".png", samples, settle)
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    sys.exit(0 if common.run_and_record(main, __file__)["passed"] else 1)
