"""The main job, with nothing to download: the whole path from raw text to served answers, on the
Python standard library's own documentation strings.

    python -m keras_bert.demo                      # a few minutes on 2 CPU cores
    python -m keras_bert.demo --quick              # well under 90 s (smoke test)
    python -m keras_bert.demo --steps 3000 --model_dir runs/demo [--verbosity 0: show INFO logs]

Stages:
1. Gather the docstrings of the standard library's modules, classes and functions (read from
   the source files with `ast`, nothing imported or executed): one document per module.
2. Learn a WordPiece vocabulary (`keras_bert.text.vocab_builder`).
3. Write masked-LM / next-sentence examples (`keras_bert.pretraining.create_pretraining_data`).
4. Pre-train a tiny BERT (`run_pretraining`: checkpoints, TensorBoard logs, plot) and report
   held-out MLM and NSP accuracy next to trivial baselines.
5. Fine-tune it, with the task runner (`keras_bert.tasks.finetune`, task `text_classification`),
   to tell which standard-library package a docstring paragraph comes from (asyncio, email, http,
   logging, multiprocessing, unittest, urllib, xml; the label is the package of the paragraph's
   module). Dev paragraphs come from whole modules held out of fine-tuning AND of pre-training,
   about a quarter of each package's paragraphs; classes are balanced by capping each package's
   paragraphs. Reports dev accuracy next to the majority class.
6. Export the fine-tuned model as a TF Serving SavedModel and a TFLite model (dynamic-range
   quantized: int8 weights), both taking raw text (`keras_bert.export`).
7. Answer raw-text requests (the dev paragraphs) through the reloaded SavedModel and the TFLite
   interpreter; print a few answers, each one's accuracy and its agreement with the Keras model.

Pre-training holds out every 20th module and the fine-tuning dev modules. Everything is written
under --model_dir (listed at the end); running again with the same --model_dir resumes the
pre-training and fine-tuning runs and exports a new version. absl INFO logs are off unless
--verbosity is given; step-by-step numbers are in the TensorBoard logs and history.json. The
numbers of the final table are also written to `<model_dir>/demo_summary.json`; README.md's demo
table is rendered from it (`readme_table`, `make readme-demo`) and checked against a fresh run by
tests/test_demo.py (slow).
"""

import ast
import collections
import contextlib
import json
import os
import random
import re
import sys
import sysconfig
import time
import zlib

from absl import flags, logging

from keras_bert import cli

SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "site-packages",
    "dist-packages",
    "lib2to3",
    "turtledemo",
    "__pycache__",
}
# The fine-tuning classes: packages with several modules and at least ~100 docstring paragraphs.
PACKAGES = ("asyncio", "email", "http", "logging", "multiprocessing", "unittest", "urllib", "xml")
QUICK_PACKAGES = ("email", "http", "logging", "xml")
PRETRAINING_HOLDOUT_EVERY = 20  # Every 20th module (by name) is held out of pre-training.
DEV_FRACTION = 0.25  # Of each package's paragraphs, in whole modules.
MIN_PARAGRAPH_WORDS = 8
# Settings of the default run and of --quick (`model`: changes to the "tiny" preset).
SETTINGS = {
    False: dict(
        steps=1500,
        vocab_size=4000,
        dupe_factor=3,
        workers=2,
        model={},
        packages=PACKAGES,
        train_cap=150,
        dev_cap=30,
        epochs=6,
        learning_rate=1e-3,
        shown_answers=8,
    ),
    True: dict(
        steps=40,
        vocab_size=1000,
        dupe_factor=1,
        workers=1,
        model=dict(num_hidden_layers=1, intermediate_size=256),
        packages=QUICK_PACKAGES,
        train_cap=64,
        dev_cap=16,
        epochs=6,
        learning_rate=2e-3,
        shown_answers=4,
    ),
}
SEQ_LENGTH, MAX_PREDICTIONS = 64, 10
LOWER_CASE = True  # An uncased vocabulary, examples and models.
QUANTIZE = "dynamic_range"

FLAGS = flags.FLAGS


def define_flags():
    """Define --steps, --model_dir, --quick."""
    cli.define(
        flags.DEFINE_integer,
        "steps",
        None,
        "Pre-training steps (default 1500, or 40 with --quick).",
    )
    cli.define(
        flags.DEFINE_string,
        "model_dir",
        "runs/demo",
        "Where data, runs, logs, plots and exports go.",
    )
    cli.define(
        flags.DEFINE_bool, "quick", False, "A tiny run of the whole path (used by the tests)."
    )


# === Text: the corpus and the labelled paragraphs ===


def stdlib_documents(max_modules=None, min_chars=200, packages=None):
    """(module name, docstring text) for the standard library's modules, in name order.

    The text of a module is its own docstring followed by those of its public classes,
    functions and methods, read with `ast` from the source (no module is imported).
    `packages`: only the modules of these top-level packages (None: all modules).
    """
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS and not d.startswith("."))
        paths.extend(os.path.join(directory, f) for f in sorted(files) if f.endswith(".py"))
    documents = []
    for path in sorted(paths):
        name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
        if any(part.startswith("_") and part != "__init__" for part in name.split(".")):
            continue
        if packages is not None and (name.split(".")[0] not in packages or "." not in name):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        docs = [ast.get_docstring(tree)] + [
            ast.get_docstring(node)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not node.name.startswith("_")
        ]
        text = "\n\n".join(d for d in docs if d)
        if len(text) >= min_chars:
            documents.append((name, text))
        if max_modules and len(documents) >= max_modules:
            break
    return documents


def write_corpus(documents, path):
    """Write documents in the original format (a sentence per line, blank line between
    documents)."""
    from keras_bert.io_utils import write_atomic
    from keras_bert.pretraining.corpus import split_document

    kept = [
        sentences
        for sentences in (split_document(text, hard_wrapped=True) for _, text in documents)
        if len(sentences) >= 2
    ]
    write_atomic(path, "".join("\n".join(sentences) + "\n\n" for sentences in kept))
    return len(kept)


def paragraphs(text, min_words=MIN_PARAGRAPH_WORDS):
    """The prose paragraphs of a docstring text: blank-line separated, whitespace joined, at
    least `min_words` words, no doctest (`>>>`) blocks."""
    found = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return [p for p in found if len(p.split()) >= min_words and ">>>" not in p]


def package_examples(
    documents, packages, dev_fraction=DEV_FRACTION, train_cap=None, dev_cap=None, seed=0
):
    """Labelled paragraphs for "which package is this paragraph from?", split by module.

    The label of a paragraph is the top-level package of its module (`email.message` ->
    "email"); single-file modules are no class. In each package, whole modules go to dev
    (in a fixed pseudo-random order, skipping any module with more than half the package's
    paragraphs) until dev holds `dev_fraction` of its paragraphs. A paragraph text occurs
    once: repeats (also across modules) are dropped, and a dev paragraph that also occurs in
    a training module is dropped from dev. Each package then keeps at most `train_cap`
    training and `dev_cap` dev paragraphs (a seeded sample), so that classes are balanced.

    Returns:
        (train, dev, dev_modules): lists of (label, paragraph, module) in a seeded shuffled
        order, and the sorted names of the dev modules.
    """
    by_package = collections.defaultdict(dict)  # package -> module -> paragraphs
    for name, text in documents:
        package = name.split(".")[0]
        if package in packages and "." in name:
            by_package[package][name] = paragraphs(text)
    rng = random.Random(seed)
    train, dev, dev_modules = [], [], []
    for package in packages:
        modules = by_package.get(package, {})
        total = sum(len(p) for p in modules.values())
        held, held_count = [], 0
        for name in sorted(modules, key=lambda n: zlib.crc32(n.encode())):
            if held_count >= dev_fraction * total:
                break
            if (
                0 < len(modules[name]) <= total / 2
                and held_count + len(modules[name]) <= 2 * dev_fraction * total
            ):
                held.append(name)
                held_count += len(modules[name])
        if not held or len(held) == len(modules):
            raise ValueError(
                f"Package {package!r} has no modules to split into training and dev "
                f"({sorted(modules)})."
            )
        seen_train = {p for name in modules if name not in held for p in modules[name]}
        splits = {"train": [], "dev": []}
        seen = set()
        for name in sorted(modules):
            split = "dev" if name in held else "train"
            for p in modules[name]:
                if p in seen or (split == "dev" and p in seen_train):
                    continue
                seen.add(p)
                splits[split].append((package, p, name))
        for split, rows, cap in (("train", train, train_cap), ("dev", dev, dev_cap)):
            chosen = splits[split]
            if cap and len(chosen) > cap:
                chosen = rng.sample(chosen, cap)
            rows.extend(chosen)
        dev_modules.extend(held)
    rng.shuffle(train)
    rng.shuffle(dev)
    return train, dev, sorted(dev_modules)


def write_tsv(rows, path):
    """Writes (label, text, ...) rows as the `text_classification` task's `label<TAB>text` lines."""
    from keras_bert.io_utils import write_atomic

    write_atomic(path, "".join(f"{label}\t{text}\n" for label, text, *_ in rows))


# === Baselines ===


def baselines(pattern, seq_length, max_predictions_per_seq, train_pattern):
    """Held-out accuracy of trivial predictors: the most frequent masked token of the training
    data for every MLM position, and the majority NSP label."""
    from keras_bert.pretraining import records

    counts = collections.Counter()
    for _, labels in records.make_dataset(
        train_pattern,
        256,
        seq_length,
        max_predictions_per_seq,
        is_training=False,
        drop_remainder=False,
    ):
        w = labels["masked_lm_weights"].numpy() > 0
        counts.update(labels["masked_lm_ids"].numpy()[w].tolist())
    top = counts.most_common(1)[0][0]
    hit = total = nsp_pos = nsp_total = 0
    for _, labels in records.make_dataset(
        pattern, 256, seq_length, max_predictions_per_seq, is_training=False, drop_remainder=False
    ):
        w = labels["masked_lm_weights"].numpy() > 0
        ids = labels["masked_lm_ids"].numpy()[w]
        hit, total = hit + int((ids == top).sum()), total + ids.size
        nsp = labels["next_sentence_labels"].numpy()
        nsp_pos, nsp_total = nsp_pos + int(nsp.sum()), nsp_total + nsp.size
    return hit / max(total, 1), max(nsp_pos, nsp_total - nsp_pos) / max(nsp_total, 1)


def majority_accuracy(train, dev):
    """Dev accuracy of always answering the most frequent training label."""
    top = collections.Counter(label for label, *_ in train).most_common(1)[0][0]
    return sum(label == top for label, *_ in dev) / max(len(dev), 1)


# === Serving ===


def answer_saved_model(version_dir, texts, batch_size=64):
    """Labels from the SavedModel's `serving_default` signature (raw strings in)."""
    import tensorflow as tf

    serve = tf.saved_model.load(version_dir).signatures["serving_default"]
    labels = []
    for i in range(0, len(texts), batch_size):
        labels += [
            s.decode() for s in serve(text=tf.constant(texts[i : i + batch_size]))["label"].numpy()
        ]
    return labels


def answer_tflite(model_file, texts, batch_size=32):
    """Labels from the TFLite model's `serving_default` signature, run by LiteRT."""
    from keras_bert.export import tflite

    serve = tflite.load_interpreter(model_file).get_signature_runner("serving_default")
    labels = []
    for i in range(0, len(texts), batch_size):
        labels += [
            s.decode() for s in serve(text=tflite.as_strings(texts[i : i + batch_size]))["label"]
        ]
    return labels


def read_predictions(path):
    """The runner's `index<TAB>prediction` file as a list of labels, in file order."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[1] for line in f.readlines()[1:] if line.strip()]


@contextlib.contextmanager
def native_stderr_to(path):
    """Sends what is written to the standard error file descriptor in this block to `path`
    (appended): the TFLite converter's and LiteRT's native log lines, which
    TF_CPP_MIN_LOG_LEVEL does not silence and which would break into the progress bar."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


# === The job ===


class _Job:
    """What the stages share: settings, directories, the paths written, and the stage lines
    ("k/N title ..." as a stage starts, an indented result line as it ends)."""

    STAGES = 7

    def __init__(self, model_dir, settings):
        self.model_dir, self.settings = model_dir, settings
        self.data_dir = os.path.join(model_dir, "data")
        self.task_dir = os.path.join(self.data_dir, "packages")
        self.paths = {}
        self.seconds = {}  # Stage title -> wall seconds.
        self.done, self.started, self.title = 0, None, None
        os.makedirs(self.task_dir, exist_ok=True)

    def start(self, title):
        self.done += 1
        self.started, self.title = time.perf_counter(), title
        print(f"{self.done}/{self.STAGES} {title} ...", flush=True)

    def result(self, text, timed=True):
        elapsed = time.perf_counter() - self.started
        if timed:
            self.seconds[self.title] = elapsed
        seconds = f" ({elapsed:.0f} s)" if timed else ""
        print(f"    {text}{seconds}", flush=True)


def run(steps=None, model_dir="runs/demo", quick=False):
    """The whole job; returns a summary dict (pre-training, fine-tuning, serving, paths)."""
    started = time.perf_counter()
    settings = dict(SETTINGS[bool(quick)])
    settings["steps"] = steps or settings["steps"]
    job = _Job(model_dir, settings)
    train_rows, dev_rows, dev_modules = _read_docstrings(job, quick)
    vocab_file, vocab_size = _learn_vocabulary(job)
    train_files, eval_files = _write_examples(job, vocab_file)
    pretraining = _pretrain(job, vocab_file, vocab_size, train_files, eval_files)
    finetuning = _finetune(job, train_rows, dev_rows, dev_modules)
    saved_model, tflite_file = _export(job, finetuning["model_path"])
    serving = _answer(job, dev_rows, finetuning, saved_model, tflite_file)
    summary = {
        "model_dir": model_dir,
        "paths": job.paths,
        "pretraining": pretraining,
        "finetuning": finetuning,
        "serving": serving,
        "majority_accuracy": majority_accuracy(train_rows, dev_rows),
        "examples": {"train": len(train_rows), "dev": len(dev_rows), "dev_modules": dev_modules},
        "seconds": time.perf_counter() - started,
    }
    summary_file = job.paths["numbers (JSON)"] = os.path.join(model_dir, SUMMARY_FILE)
    write_summary(summary, job, summary_file)
    print(format_table(summary))
    return summary


SUMMARY_FILE = "demo_summary.json"


def write_summary(summary, job, path):
    """The final table's numbers as JSON (what README.md's demo table is rendered from)."""
    from keras_bert.io_utils import write_atomic

    pre, fine = summary["pretraining"], summary["finetuning"]
    numbers = {
        "settings": {k: v for k, v in job.settings.items() if k != "model"},
        "pretraining": {
            "steps": pre["steps"],
            "mlm_accuracy": pre["eval"]["mlm_accuracy"],
            "nsp_accuracy": pre["eval"]["nsp_accuracy"],
            **pre["baselines"],
        },
        "finetuning": {
            "accuracy": fine["eval"]["accuracy"],
            "macro_f1": fine["eval"]["macro_f1"],
            "best_epoch": fine["best"]["epoch"],
            "majority_accuracy": summary["majority_accuracy"],
            "train_paragraphs": summary["examples"]["train"],
            "dev_paragraphs": summary["examples"]["dev"],
            "classes": len(job.settings["packages"]),
        },
        "serving": summary["serving"],
        "seconds": {"total": summary["seconds"], **job.seconds},
    }
    write_atomic(path, json.dumps(numbers, indent=1, sort_keys=True) + "\n")


# The rows of README.md's demo table that a rerun must reproduce (all but the wall time).
README_BEGIN, README_END = "<!-- demo-table:begin -->", "<!-- demo-table:end -->"


def readme_table(numbers):
    """README.md's demo table (Markdown) from `demo_summary.json`'s numbers. Every row but the last
    (wall time) is deterministic: a rerun of the demo must render it identically."""
    pre, fine, serving = numbers["pretraining"], numbers["finetuning"], numbers["serving"]
    seconds = numbers["seconds"]

    def stage(word):
        return next((round(v) for k, v in seconds.items() if k.lower().startswith(word)), 0)

    rows = [
        (
            "held-out masked-LM accuracy",
            f"{pre['mlm_accuracy']:.3f} (most frequent token: "
            f"{pre['mlm_most_frequent_token']:.3f})",
        ),
        (
            "held-out next-sentence accuracy",
            f"{pre['nsp_accuracy']:.3f} (majority label: {pre['nsp_majority']:.3f})",
        ),
        (
            f"package of a paragraph, dev accuracy ({fine['train_paragraphs']:,} train / "
            f"{fine['dev_paragraphs']:,} dev paragraphs, {fine['classes']} classes)",
            f"{fine['accuracy']:.3f}, macro F1 {fine['macro_f1']:.3f} (majority class "
            f"{fine['majority_accuracy']:.3f}; best epoch {fine['best_epoch']} of "
            f"{numbers['settings']['epochs']})",
        ),
        *[
            (
                f"{name}: accuracy / same answers as the Keras model",
                f"{serving[name]['accuracy']:.3f} / {serving[name]['agreement_with_keras']:.1%}",
            )
            for name in ("SavedModel", "TFLite")
        ],
        (
            "wall time (varies with the machine)",
            f"{seconds['total']:.0f} s (pre-training {stage('pre-training')}, fine-tuning "
            f"{stage('fine-tuning')}, export {stage('exporting')}, answers {stage('answering')})",
        ),
    ]
    return "\n".join(["| | `make demo` |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows]])


def update_readme(readme_path, numbers):
    """Replaces the text between README's demo-table markers with `readme_table(numbers)`."""
    with open(readme_path, encoding="utf-8") as f:
        text = f.read()
    begin, end = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    text = text[:begin] + "\n" + readme_table(numbers) + "\n" + text[end:]
    with open(readme_path, "w", encoding="utf-8") as f:
        f.write(text)


def _read_docstrings(job, quick):
    """Stage 1: the pre-training corpus files and the labelled paragraphs (train, dev, dev
    modules)."""
    job.start("Reading the standard library's docstrings")
    packages = job.settings["packages"]
    documents = stdlib_documents(packages=packages if quick else None)
    train_rows, dev_rows, dev_modules = package_examples(
        documents, packages, train_cap=job.settings["train_cap"], dev_cap=job.settings["dev_cap"]
    )
    held_out = set(dev_modules) | {name for name, _ in documents[::PRETRAINING_HOLDOUT_EVERY]}
    train_corpus = os.path.join(job.data_dir, "train.txt")
    n_train = write_corpus([d for d in documents if d[0] not in held_out], train_corpus)
    n_eval = write_corpus(
        [d for d in documents if d[0] in held_out], os.path.join(job.data_dir, "eval.txt")
    )
    job.result(
        f"{len(documents)} modules: pre-training on {n_train} "
        f"({os.path.getsize(train_corpus) / 1e6:.1f} MB of text), {n_eval} held out (every "
        f"{PRETRAINING_HOLDOUT_EVERY}th and the fine-tuning dev modules)"
    )
    return train_rows, dev_rows, dev_modules


def _learn_vocabulary(job):
    """Stage 2: vocab.txt from the pre-training corpus; returns (path, size)."""
    from keras_bert.text.vocab import write_vocabulary
    from keras_bert.text.vocab_builder import build_vocabulary

    job.start("Learning a WordPiece vocabulary")
    vocab_file = job.paths["vocabulary"] = os.path.join(job.data_dir, "vocab.txt")
    vocab = build_vocabulary(
        [os.path.join(job.data_dir, "train.txt")],
        vocab_size=job.settings["vocab_size"],
        lower_case=LOWER_CASE,
    )
    write_vocabulary(vocab, vocab_file)
    job.result(f"{len(vocab)} tokens")
    return vocab_file, len(vocab)


def _write_examples(job, vocab_file):
    """Stage 3: masked-LM / next-sentence TFRecords; returns their (train, held-out) patterns."""
    from keras_bert.pretraining.create_pretraining_data import create_pretraining_data
    from keras_bert.pretraining.records import count_records

    job.start("Writing masked-LM / next-sentence examples")
    common = dict(
        vocab_file=vocab_file,
        lower_case=LOWER_CASE,
        max_seq_length=SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        num_workers=job.settings["workers"],
    )
    data = job.data_dir
    create_pretraining_data(
        os.path.join(data, "train.txt"),
        os.path.join(data, "train"),
        dupe_factor=job.settings["dupe_factor"],
        num_shards=2,
        **common,
    )
    create_pretraining_data(
        os.path.join(data, "eval.txt"), os.path.join(data, "eval"), dupe_factor=1, seed=7, **common
    )
    train_files, eval_files = (
        os.path.join(data, "train", "*.tfrecord"),
        os.path.join(data, "eval", "*.tfrecord"),
    )
    job.paths["pre-training examples"] = os.path.join(data, "train")
    job.result(
        f"{count_records(train_files)} training and {count_records(eval_files)} held-out examples"
    )
    return train_files, eval_files


def _pretrain(job, vocab_file, vocab_size, train_files, eval_files):
    """Stage 4: `run_pretraining` and the held-out baselines; returns its summary."""
    import keras_bert
    from keras_bert.pretraining.runner import run_pretraining

    config = keras_bert.BertConfig.preset(
        "tiny", vocab_size=vocab_size, max_position_embeddings=SEQ_LENGTH
    )
    config = config.replace(**job.settings["model"])
    layers, steps = config.num_hidden_layers, job.settings["steps"]
    job.start(
        f"Pre-training a tiny BERT ({layers} layer{'s' * (layers > 1)}, hidden size "
        f"{config.hidden_size}) for {steps} steps"
    )
    run_dir = job.paths["pre-training run"] = os.path.join(job.model_dir, "run")
    pretraining = run_pretraining(
        bert_config=config,
        train_files=train_files,
        eval_files=eval_files,
        batch_size=32,
        seq_length=SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        num_train_steps=steps,
        num_warmup_steps=max(1, steps // 10),
        learning_rate=1e-3,
        model_dir=run_dir,
        checkpoint_every=steps,
        verbose=True,
        vocab_file=vocab_file,
        lower_case=LOWER_CASE,
    )  # Recorded in the run: it loads as an init checkpoint.
    mlm_base, nsp_base = baselines(eval_files, SEQ_LENGTH, MAX_PREDICTIONS, train_files)
    pretraining["baselines"] = {"mlm_most_frequent_token": mlm_base, "nsp_majority": nsp_base}
    evals = pretraining["eval"]
    job.result(
        f"held-out MLM accuracy {evals['mlm_accuracy']:.3f} (most frequent token {mlm_base:.3f}), "
        f"NSP accuracy {evals['nsp_accuracy']:.3f} (majority {nsp_base:.3f})"
    )
    job.paths.update(
        {
            "pre-training checkpoint": pretraining["checkpoint"],
            "pre-training TensorBoard logs": pretraining["tensorboard_dir"],
            "pre-training curve": pretraining["plot"],
        }
    )
    return pretraining


def _finetune(job, train_rows, dev_rows, dev_modules):
    """Stage 5: the package task's TSV files and `run_finetuning` from the pre-training run."""
    from keras_bert.tasks.runner import run_finetuning

    job.start(
        f"Fine-tuning it to tell which of {len(job.settings['packages'])} packages a docstring "
        f"paragraph is from"
    )
    write_tsv(train_rows, os.path.join(job.task_dir, "train.tsv"))
    write_tsv(dev_rows, os.path.join(job.task_dir, "dev.tsv"))
    write_tsv(
        dev_rows, os.path.join(job.task_dir, "test.tsv")
    )  # The requests: Keras' answers go to predictions/.
    job.paths["fine-tuning data"] = job.task_dir
    job.result(
        f"{len(train_rows)} training paragraphs, {len(dev_rows)} dev paragraphs from "
        f"{len(dev_modules)} held-out modules ({', '.join(dev_modules[:3])}, ...)",
        timed=False,
    )
    finetuning = run_finetuning(
        task="text_classification",
        data_dir=job.task_dir,
        init_checkpoint=job.paths["pre-training run"],
        model_dir=os.path.join(job.model_dir, "finetune"),
        do_train=True,
        do_eval=True,
        do_predict=True,
        seq_length=SEQ_LENGTH,
        batch_size=32,
        learning_rate=job.settings["learning_rate"],
        num_train_epochs=job.settings["epochs"],
        verbose=True,
    )
    metrics, epochs = finetuning["eval"], job.settings["epochs"]
    job.result(
        f"dev accuracy {metrics['accuracy']:.3f}, macro F1 {metrics['macro_f1']:.3f} (majority "
        f"class {majority_accuracy(train_rows, dev_rows):.3f}; best epoch "
        f"{finetuning['best']['epoch']} of {epochs})"
    )
    job.paths.update(
        {
            "fine-tuning run": os.path.join(job.model_dir, "finetune"),
            "fine-tuned model": finetuning["model_path"],
            "fine-tuning TensorBoard logs": finetuning["tensorboard_dir"],
            "fine-tuning curve": finetuning["plot"],
        }
    )
    return finetuning


def _export(job, model_path):
    """Stage 6: a SavedModel version and a TFLite version; returns (version dir, .tflite file)."""
    from keras_bert import export
    from keras_bert.export import tflite
    from keras_bert.training.progress import ProgressBar

    job.start(f"Exporting a SavedModel and a TFLite model ({QUANTIZE.replace('_', '-')} quantized)")
    native_log = job.paths["converter and interpreter logs"] = os.path.join(
        job.model_dir, "native_logs.txt"
    )
    bar = ProgressBar(2)
    bar.update(0, [("now", "SavedModel")])
    with native_stderr_to(native_log):
        saved_model = export.export_saved_model(model_path, os.path.join(job.model_dir, "serving"))
        bar.update(1, [("now", "TFLite")])
        tflite_dir = tflite.export_tflite(
            model_path, os.path.join(job.model_dir, "tflite"), quantize=QUANTIZE
        )
    bar.update(2)
    tflite_file = os.path.join(tflite_dir, tflite.MODEL_FILE)
    job.paths.update({"SavedModel": saved_model, "TFLite model": tflite_file})
    job.result(
        f"SavedModel {saved_model}, TFLite {tflite_file} ({os.path.getsize(tflite_file) / 1e6:.1f} "
        "MB)"
    )
    return saved_model, tflite_file


def _answer(job, dev_rows, finetuning, saved_model, tflite_file):
    """Stage 7: the dev paragraphs through both exports; accuracy and agreement with Keras."""
    job.start(f"Answering {len(dev_rows)} dev paragraphs as raw-text requests")
    texts, truth = [text for _, text, _ in dev_rows], [label for label, *_ in dev_rows]
    keras_answers = read_predictions(finetuning["predictions"][0])
    with native_stderr_to(job.paths["converter and interpreter logs"]):
        answers = {
            "SavedModel": answer_saved_model(saved_model, texts),
            "TFLite": answer_tflite(tflite_file, texts),
        }
    print(format_answers(texts, truth, answers, job.settings["shown_answers"]))
    serving = {
        name: {"accuracy": _share(got, truth), "agreement_with_keras": _share(got, keras_answers)}
        for name, got in answers.items()
    }
    job.result(
        "; ".join(
            f"{name} accuracy {serving[name]['accuracy']:.3f}, agrees with Keras on "
            f"{serving[name]['agreement_with_keras']:.1%}"
            for name in answers
        )
    )
    serving["Keras"] = {"accuracy": _share(keras_answers, truth), "agreement_with_keras": 1.0}
    return serving


def _share(got, want):
    return sum(a == b for a, b in zip(got, want)) / max(len(want), 1)


def format_answers(texts, truth, answers, count):
    """A few requests: the paragraph's start, the true package and each model's answer."""
    names = list(answers)
    rows = [("true package", *names, "paragraph")]
    for i in range(min(count, len(texts))):
        snippet = texts[i] if len(texts[i]) <= 70 else texts[i][:67] + "..."
        rows.append((truth[i], *[answers[n][i] for n in names], snippet))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]) - 1)]
    return "\n".join(
        "    " + "  ".join(v.ljust(w) for v, w in zip(r, widths)) + "  " + r[-1] for r in rows
    )


def format_table(summary):
    """The result table printed at the end: what each stage achieved and where it was written."""
    pre, fine, serving = summary["pretraining"], summary["finetuning"], summary["serving"]
    first, last, evals, base = pre["history"][0], pre["final"], pre["eval"], pre["baselines"]
    rows = [
        (
            "pre-training steps",
            f"{pre['steps']}  ({pre['examples_per_second'] or 0:.0f} examples/s)",
        ),
        (
            "train MLM loss (first loop -> last)",
            f"{first['mlm_loss']:.3f} -> {last['mlm_loss']:.3f}",
        ),
        (
            "held-out MLM accuracy",
            f"{evals['mlm_accuracy']:.3f}  (most frequent token: "
            f"{base['mlm_most_frequent_token']:.3f})",
        ),
        (
            "held-out NSP accuracy",
            f"{evals['nsp_accuracy']:.3f}  (majority label: {base['nsp_majority']:.3f})",
        ),
        (
            "package of a paragraph, dev accuracy",
            f"{fine['eval']['accuracy']:.3f}  (majority class: {summary['majority_accuracy']:.3f}; "
            f"{summary['examples']['train']} training / {summary['examples']['dev']} dev "
            "paragraphs)",
        ),
        *[
            (
                f"{name} accuracy / agreement with Keras",
                f"{serving[name]['accuracy']:.3f} / {serving[name]['agreement_with_keras']:.3f}",
            )
            for name in ("SavedModel", "TFLite")
        ],
        ("total time", f"{summary['seconds']:.0f} s"),
        *[(name, str(path)) for name, path in summary["paths"].items()],
        ("TensorBoard (both runs)", f"tensorboard --logdir {summary['model_dir']}"),
    ]
    width = max(len(k) for k, _ in rows)
    line = "-" * (width + 70)
    return "\n".join(
        [
            line,
            "BERT demo: standard-library docstrings -> pre-training -> fine-tuning -> serving",
            line,
        ]
        + [f"{k.ljust(width)}  {v}" for k, v in rows]
        + [line]
    )


def _main(argv):
    del argv
    if not FLAGS["verbosity"].present:
        logging.set_verbosity(
            logging.WARNING
        )  # Progress is the stage lines and bars; --verbosity=0 logs INFO.
    run(steps=FLAGS.steps, model_dir=FLAGS.model_dir, quick=FLAGS.quick)


def main():
    """Entry point (`python -m keras_bert.demo`, `keras-bert-demo`, `make demo`)."""
    cli.run_command(__doc__, define_flags, [], _main)


if __name__ == "__main__":
    main()
