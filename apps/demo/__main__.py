"""The main job, with nothing to download: the whole path from raw text to served answers, on the
Python standard library's own documentation strings.

    python -m keras_bert.apps.demo                 # a few minutes on 2 CPU cores
    python -m keras_bert.apps.demo --quick         # well under 90 s (smoke test)
    python -m keras_bert.apps.demo --steps 3000 --model_dir runs/demo [--verbosity 0: INFO logs]

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
table is rendered from it with a fingerprint of the code under the demo (`make readme-demo`):
tests/test_demo.py fails when that code changes and the table was not rendered again, and (slow)
checks the table against a fresh run.
"""

import os
import time

from absl import flags, logging

from keras_bert import cli
from keras_bert.apps.demo import corpus, finetuning, pretraining, serving, summary
from keras_bert.apps.demo.job import SETTINGS, Job

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


def run(steps=None, model_dir="runs/demo", quick=False):
    """The whole job; returns a summary dict (pre-training, fine-tuning, serving, paths)."""
    started = time.perf_counter()
    settings = dict(SETTINGS[bool(quick)])
    settings["steps"] = steps or settings["steps"]
    job = Job(model_dir, settings)
    train_rows, dev_rows, dev_modules = corpus.read_docstrings(job, quick)
    vocab_file, vocab_size = pretraining.learn_vocabulary(job)
    train_files, eval_files = pretraining.write_examples(job, vocab_file)
    pretrained = pretraining.pretrain(job, vocab_file, vocab_size, train_files, eval_files)
    finetuned = finetuning.finetune(job, train_rows, dev_rows, dev_modules)
    saved_model, tflite_file = serving.export_models(job, finetuned["model_path"])
    answers = serving.answer_requests(job, dev_rows, finetuned, saved_model, tflite_file)
    numbers = {
        "model_dir": model_dir,
        "paths": job.paths,
        "pretraining": pretrained,
        "finetuning": finetuned,
        "serving": answers,
        "majority_accuracy": finetuning.majority_accuracy(train_rows, dev_rows),
        "examples": {"train": len(train_rows), "dev": len(dev_rows), "dev_modules": dev_modules},
        "seconds": time.perf_counter() - started,
    }
    summary_file = job.paths["numbers (JSON)"] = os.path.join(model_dir, summary.SUMMARY_FILE)
    summary.write_summary(numbers, job, summary_file)
    print(summary.format_table(numbers))
    return numbers


def _main(argv):
    del argv
    if not FLAGS["verbosity"].present:
        logging.set_verbosity(
            logging.WARNING
        )  # Progress is the stage lines and bars; --verbosity=0 logs INFO.
    run(steps=FLAGS.steps, model_dir=FLAGS.model_dir, quick=FLAGS.quick)


def console_main():
    """Entry point (`python -m keras_bert.apps.demo`, `keras-bert-demo`, `make demo`)."""
    cli.run_command(__doc__, define_flags, [], _main)


if __name__ == "__main__":
    console_main()
