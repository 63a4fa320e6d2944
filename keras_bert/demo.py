"""The main job, with nothing to download: pre-train a tiny BERT on the Python standard
library's own documentation strings and report what it learned.

    python -m keras_bert.demo                      # a few minutes on 2 CPU cores
    python -m keras_bert.demo --quick              # under a minute (smoke test)
    python -m keras_bert.demo --steps 3000 --model_dir runs/demo

Steps: (1) gather the docstrings of the standard library's modules, classes and functions
(read from the source files with `ast`, nothing imported or executed), one document per
module, split into sentences, ~5% of the modules held out; (2) learn a WordPiece vocabulary
(`keras_bert.text.vocab_builder`); (3) write masked-LM / next-sentence examples as TFRecords
(`keras_bert.pretraining.create_pretraining_data`); (4) pre-train with `run_pretraining`
(checkpoints, TensorBoard logs, plot); (5) print MLM and NSP accuracy on the held-out modules
next to simple baselines.
"""

import ast
import collections
import os
import sysconfig
import time

from absl import app, flags

from keras_bert import cli

SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "dist-packages", "lib2to3", "turtledemo", "__pycache__"}

FLAGS = flags.FLAGS


def define_flags():
    """Define --steps, --model_dir, --quick."""
    cli.define(flags.DEFINE_integer, "steps", None, "Training steps (default 1500, or 40 with --quick).")
    cli.define(flags.DEFINE_string, "model_dir", "runs/demo", "Where data, checkpoints, logs and the plot go.")
    cli.define(flags.DEFINE_bool, "quick", False, "A tiny run in under a minute (used by the tests).")


def stdlib_documents(max_modules=None, min_chars=200):
    """(module name, docstring text) for the standard library's modules, in name order.

    The text of a module is its own docstring followed by those of its public classes,
    functions and methods, read with `ast` from the source (no module is imported).
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
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        docs = [ast.get_docstring(tree)] + [
            ast.get_docstring(node) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not node.name.startswith("_")]
        text = "\n\n".join(d for d in docs if d)
        if len(text) >= min_chars:
            documents.append((name, text))
        if max_modules and len(documents) >= max_modules:
            break
    return documents


def write_corpus(documents, path):
    """Write documents in the original format (a sentence per line, blank line between documents)."""
    from keras_bert.pretraining.corpus import split_document
    from keras_bert.training.io_utils import write_atomic
    kept = [sentences for sentences in (split_document(text, hard_wrapped=True) for _, text in documents)
            if len(sentences) >= 2]
    write_atomic(path, "".join("\n".join(sentences) + "\n\n" for sentences in kept))
    return len(kept)


def baselines(pattern, seq_length, max_predictions_per_seq, train_pattern):
    """Held-out accuracy of trivial predictors: the most frequent masked token of the training
    data for every MLM position, and the majority NSP label."""
    from keras_bert.pretraining import records
    counts = collections.Counter()
    for _, labels in records.make_dataset(train_pattern, 256, seq_length, max_predictions_per_seq,
                                          is_training=False, drop_remainder=False):
        w = labels["masked_lm_weights"].numpy() > 0
        counts.update(labels["masked_lm_ids"].numpy()[w].tolist())
    top = counts.most_common(1)[0][0]
    hit = total = nsp_pos = nsp_total = 0
    for _, labels in records.make_dataset(pattern, 256, seq_length, max_predictions_per_seq, is_training=False,
                                          drop_remainder=False):
        w = labels["masked_lm_weights"].numpy() > 0
        ids = labels["masked_lm_ids"].numpy()[w]
        hit, total = hit + int((ids == top).sum()), total + ids.size
        nsp = labels["next_sentence_labels"].numpy()
        nsp_pos, nsp_total = nsp_pos + int(nsp.sum()), nsp_total + nsp.size
    return hit / max(total, 1), max(nsp_pos, nsp_total - nsp_pos) / max(nsp_total, 1)


def run(steps=None, model_dir="runs/demo", quick=False):
    """The whole job; returns the `run_pretraining` summary plus the baselines."""
    import keras_bert
    from keras_bert.pretraining.create_pretraining_data import create_pretraining_data
    from keras_bert.pretraining.runner import run_pretraining
    from keras_bert.text.vocab_builder import build_vocabulary, write_vocabulary

    started = time.perf_counter()
    steps = steps or (40 if quick else 1500)
    seq_length, max_predictions = (64, 10)
    lower_case = True  # An uncased vocabulary, examples and model.
    data_dir = os.path.join(model_dir, "data")
    os.makedirs(data_dir, exist_ok=True)

    print("1/5 Gathering standard-library docstrings ...", flush=True)
    documents = stdlib_documents(max_modules=80 if quick else None)
    held_out = documents[::20]  # Every 20th module (by name) is held out.
    train_docs = [d for i, d in enumerate(documents) if i % 20]
    train_corpus, eval_corpus = os.path.join(data_dir, "train.txt"), os.path.join(data_dir, "eval.txt")
    n_train, n_eval = write_corpus(train_docs, train_corpus), write_corpus(held_out, eval_corpus)
    print(f"    {n_train} training modules, {n_eval} held-out modules, "
          f"{os.path.getsize(train_corpus) / 1e6:.1f} MB of text", flush=True)

    print("2/5 Learning a WordPiece vocabulary ...", flush=True)
    vocab_file = os.path.join(data_dir, "vocab.txt")
    vocab = build_vocabulary([train_corpus], vocab_size=1000 if quick else 4000, lower_case=lower_case)
    write_vocabulary(vocab, vocab_file)
    print(f"    {len(vocab)} tokens -> {vocab_file}", flush=True)

    print("3/5 Creating masked-LM / next-sentence examples ...", flush=True)
    common = dict(vocab_file=vocab_file, lower_case=lower_case, max_seq_length=seq_length,
                  max_predictions_per_seq=max_predictions, num_workers=1 if quick else 2)
    create_pretraining_data(train_corpus, os.path.join(data_dir, "train"), dupe_factor=1 if quick else 3,
                            num_shards=2, **common)
    create_pretraining_data(eval_corpus, os.path.join(data_dir, "eval"), dupe_factor=1, seed=7, **common)
    train_files = os.path.join(data_dir, "train", "*.tfrecord")
    eval_files = os.path.join(data_dir, "eval", "*.tfrecord")
    from keras_bert.pretraining.records import count_records
    print(f"    {count_records(train_files)} training and {count_records(eval_files)} held-out examples",
          flush=True)

    print(f"4/5 Pre-training a tiny BERT for {steps} steps ...", flush=True)
    config = keras_bert.BertConfig.preset("tiny", vocab_size=len(vocab), max_position_embeddings=seq_length)
    if quick:
        config = config.replace(num_hidden_layers=1, intermediate_size=256)
    summary = run_pretraining(
        bert_config=config, train_files=train_files, eval_files=eval_files, batch_size=32, seq_length=seq_length,
        max_predictions_per_seq=max_predictions, num_train_steps=steps, num_warmup_steps=max(1, steps // 10),
        learning_rate=1e-3, model_dir=os.path.join(model_dir, "run"), checkpoint_every=steps, verbose=True,
        vocab_file=vocab_file, lower_case=lower_case)  # Recorded in the run: it loads as an init checkpoint.

    print("\n5/5 Held-out evaluation", flush=True)
    mlm_base, nsp_base = baselines(eval_files, seq_length, max_predictions, train_files)
    summary["baselines"] = {"mlm_most_frequent_token": mlm_base, "nsp_majority": nsp_base}
    summary["seconds"] = time.perf_counter() - started
    print(format_table(summary))
    return summary


def format_table(summary):
    """The result table printed at the end."""
    first, last, evals, base = summary["history"][0], summary["final"], summary["eval"], summary["baselines"]
    rows = [
        ("training steps", f"{summary['steps']}"),
        ("train MLM loss (first loop -> last)", f"{first['mlm_loss']:.3f} -> {last['mlm_loss']:.3f}"),
        ("held-out MLM accuracy", f"{evals['mlm_accuracy']:.3f}  (most frequent token: {base['mlm_most_frequent_token']:.3f})"),
        ("held-out NSP accuracy", f"{evals['nsp_accuracy']:.3f}  (majority label: {base['nsp_majority']:.3f})"),
        ("held-out MLM / NSP loss", f"{evals['mlm_loss']:.3f} / {evals['nsp_loss']:.3f}"),
        ("examples / second", f"{summary['examples_per_second']:.0f}"),
        ("total time", f"{summary['seconds']:.0f} s"),
        ("checkpoint", summary["checkpoint"]),
        ("TensorBoard logs", f"{summary['tensorboard_dir']}  (tensorboard --logdir {summary['tensorboard_dir']})"),
        ("training curve", str(summary["plot"])),
    ]
    width = max(len(k) for k, _ in rows)
    line = "-" * (width + 60)
    return "\n".join([line, "BERT pre-training demo (Python standard-library docstrings)", line]
                     + [f"{k.ljust(width)}  {v}" for k, v in rows] + [line])


def _main(argv):
    del argv
    run(steps=FLAGS.steps, model_dir=FLAGS.model_dir, quick=FLAGS.quick)


def main():
    """Entry point (`python -m keras_bert.demo`, `keras-bert-demo`, `make demo`)."""
    define_flags()
    app.run(_main)


if __name__ == "__main__":
    main()
