"""The GLUE suite in one command: the paper's protocol on every task, the leaderboard zip, a report.

    python -m keras_bert.tasks.glue_suite --data_dir=glue_data --init_checkpoint=... \\
        --model_dir=runs/glue [--tasks=cola,mrpc,rte] [--restarts=3] [--max_train_examples=20000]

(console script `keras-bert-glue`). `--data_dir` holds the GLUE folders as distributed (CoLA, SST-2,
MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI and diagnostic/diagnostic.tsv, the AX set). For each task
of `--tasks` (default all nine) the sweep of `keras_bert.tasks.sweep` runs its grid (default: the
paper's learning rates 5e-5, 4e-5, 3e-5, 2e-5 at batch 32 for 3 epochs; `--learning_rates`,
`--batch_sizes`, `--num_train_epochs`, `--optimizers`, `--seeds` / `--restarts` as for
`keras-bert-finetune --sweep`) in `<model_dir>/<task>/`, and its best run predicts the task's test
set. MNLI's best model also predicts AX. WNLI is handled as the paper did ("we always predicted
the majority class", the training set's; its dev score is that of the majority class) unless
`--wnli=train`.

`--model_dir` receives, besides the tasks' sweep directories:
- `glue_submission.zip`: the files the GLUE server takes, at the zip's top level: CoLA.tsv,
  SST-2.tsv, MRPC.tsv, STS-B.tsv, QQP.tsv, MNLI-m.tsv, MNLI-mm.tsv, QNLI.tsv, RTE.tsv, WNLI.tsv,
  AX.tsv; each `index<TAB>prediction` with one row per test example in the test file's order, the
  labels of the task's own vocabulary (0/1; entailment/not_entailment for QNLI and RTE;
  entailment/neutral/contradiction for MNLI and AX; STS-B a score in [0, 5]). `--nosubmission`
  skips the test sets (then no test files are needed);
- `results.json`: per task the dev scores of the best run (every metric), its setting, the spread
  of its setting's score across seeds, every run's score, the training cap if any; the GLUE
  average without WNLI over the tasks run (the paper's Table 1 columns: MNLI-m and -mm separate,
  F1 for MRPC and QQP, Spearman for STS-B); the paper's BERT-base and BERT-large test numbers;
- `results.md`: that as a table; `results.png`: each task's dev metric per learning rate and seed.

Before anything runs, every task asked for is checked: its folder and files must be there (a
missing task is named; run the others with --tasks), and each test file must have the row count
and the ids 0..n-1 of the distributed one (`TEST_ROWS`). A killed suite resumes where it stopped
(the sweeps resume; finished runs are kept). Progress lines say which task and run of how many,
and the expected time left.
"""

import collections
import os
import time
from collections.abc import Callable
from typing import Any

from absl import logging

from keras_bert.tasks import sweep
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.glue_suite_plan import WNLI_MODES, SuitePlan, plan_suite
from keras_bert.tasks.glue_suite_report import RESULTS_MD, write_report
from keras_bert.tasks.glue_suite_submission import write_submission_zip

# The suite's parts: `glue_suite_plan` (what runs, everything checked first),
# `glue_suite_submission` (the zip) and `glue_suite_report` (results.json, .md, .png); this module
# runs a plan and is the command line.


def run_suite(
    plan: SuitePlan, runner: Callable[..., dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Runs a `plan_suite` plan: each task's sweep (or WNLI's majority class), then the zip and the
    report (results.json, .md, .png, rewritten after every task). Returns results.json's dict."""
    progress = sweep.Progress(_weights(plan))
    results: dict[str, Any] = {"tasks": {}}
    started = time.perf_counter()
    for number, task in enumerate(plan.tasks, start=1):
        progress.prefix = f"task {number}/{len(plan.tasks)} {task}"
        if task in plan.grids:
            first, count = progress.done + 1, len(plan.grids[task].settings())
            progress.prefix += f" (runs {first}-{first + count - 1})"
            outcome = sweep.run_sweep(plan.configs[task], plan.grids[task], progress, runner)
            record = _task_record(plan, task, outcome)
        else:
            logging.info("%s: WNLI, the majority class of its training set", progress.prefix)
            record = _majority(plan, task)
        results["tasks"][task] = record
        results = write_report(plan, results)
    if plan.submission:
        results["submission"] = write_submission_zip(plan, results)
        results = write_report(plan, results)
    logging.info(
        "GLUE suite done in %.0f s: %s",
        time.perf_counter() - started,
        os.path.join(plan.model_dir, RESULTS_MD),
    )
    return results


def _weights(plan):
    """Each run's weight for the time left: its training examples (capped) x epochs."""
    return [
        _used(plan, task) * s["num_train_epochs"]
        for task in plan.tasks
        if task in plan.grids
        for s in plan.grids[task].settings()
    ]


def _used(plan, task):
    """The training examples a run of `task` uses (the file's, or max_train_examples if fewer)."""
    cap = plan.configs[task].max_train_examples
    return min(plan.train_examples[task], cap) if cap else plan.train_examples[task]


def _task_record(plan, task, outcome):
    """A task's entry of results.json from its sweep's results."""
    predictions = _prediction_files(task, outcome["best_dir"]) if plan.submission else {}
    return {
        "metric": outcome["metric"],
        "dev": outcome["best"]["metrics"],
        "best_run": outcome["best_run"],
        "best_setting": outcome["best"]["setting"],
        "best_epoch": outcome["best"]["best_epoch"],
        "seeds": outcome["seeds"],
        "runs": [{k: r[k] for k in ("name", "setting", "score")} for r in outcome["runs"]],
        "run_dir": os.path.relpath(outcome["best_dir"], plan.model_dir),
        "predictions": predictions,
        "train_examples": plan.train_examples[task],
        "train_examples_used": _used(plan, task),
    }


def _prediction_files(task, run_dir):
    """{submission file name: path} of the task's best run."""
    from keras_bert.tasks.glue import data as glue

    return {
        name: os.path.join(run_dir, "predictions", name)
        for name in glue.SPECS[task].predict_splits.values()
    }


def _majority(plan, task):
    """WNLI as the paper handled it: the training set's majority class, on dev and test."""
    from keras_bert.tasks.glue import data as glue
    from keras_bert.tasks.glue.metrics import compute_metrics

    config, spec = plan.configs[task], glue.SPECS[task]
    train = glue.read_examples(spec, config.data_dir, "train")
    counts = collections.Counter(e.label for e in train)
    label = max(spec.labels, key=lambda value: (counts[value], -spec.labels.index(value)))
    dev = glue.read_examples(spec, config.data_dir, "dev")
    metrics = compute_metrics(spec, [e.label for e in dev], [label] * len(dev))
    predictions = {}
    if plan.submission:
        out_dir = os.path.join(config.model_dir, "predictions")
        for split in spec.predict_splits:
            test = glue.read_examples(spec, config.data_dir, split)
            path = glue.write_submission(spec, split, test, [label] * len(test), out_dir)
            predictions[os.path.basename(path)] = path
    return {
        "metric": spec.main_metric,
        "dev": metrics,
        "best_run": f"majority class {label!r}",
        "best_setting": {"majority_class": label},
        "best_epoch": None,
        "seeds": None,
        "runs": [],
        "run_dir": None,
        "predictions": predictions,
        "train_examples": len(train),
        "train_examples_used": len(train),
    }


# === Command line ===

_SUITE_FLAGS = ("tasks", "wnli", "submission", "check_test_rows")
# FinetuneConfig fields the suite sets itself.
_SUITE_SETS = (
    "task",
    "data_dir",
    "model_dir",
    "do_train",
    "do_eval",
    "do_predict",
    "num_train_epochs",
)


def define_flags():
    """`keras-bert-finetune`'s flags (FinetuneConfig, task options, the sweep's lists) and the
    suite's own: --tasks, --wnli, --[no]submission, --[no]check_test_rows."""
    from absl import flags

    from keras_bert import cli
    from keras_bert.tasks import finetune

    finetune.define_flags()
    cli.define(
        flags.DEFINE_string, "tasks", None, "Comma-separated GLUE tasks (default: all nine)."
    )
    cli.define(
        flags.DEFINE_enum,
        "wnli",
        "majority",
        WNLI_MODES,
        "WNLI: the training set's majority class (the paper) or a sweep like the others.",
    )
    cli.define(
        flags.DEFINE_bool,
        "submission",
        True,
        "Predict the test sets and write glue_submission.zip.",
    )
    cli.define(
        flags.DEFINE_bool,
        "check_test_rows",
        True,
        "Check each test file's row count against the distributed one (ids 0..n-1 always).",
    )


def plan_from_flags() -> SuitePlan:
    """The `SuitePlan` of the parsed flags (checks everything, writes nothing)."""
    from absl import flags

    from keras_bert import cli
    from keras_bert.tasks import registry
    from keras_bert.training import settings as settings_lib

    FLAGS = flags.FLAGS
    if FLAGS.task or FLAGS.sweep:
        raise cli.UsageError(
            "The suite picks tasks with --tasks and always sweeps: drop --task/--sweep."
        )
    values = settings_lib.flag_values(FinetuneConfig)
    given = {n: FLAGS[n].value for n in registry.option_fields() if FLAGS[n].value is not None}
    if given:
        raise cli.UsageError(f"GLUE tasks take no task options: {', '.join(given)}.")
    epochs = FLAGS["num_train_epochs"].value
    grid = {
        "learning_rates": FLAGS.learning_rates,
        "batch_sizes": FLAGS.batch_sizes,
        "num_train_epochs": epochs or None,
        "optimizers": FLAGS.optimizers,
        "seeds": FLAGS.seeds,
        "restarts": FLAGS.restarts,
    }
    return plan_suite(
        FLAGS.data_dir,
        FLAGS.model_dir,
        {k: v for k, v in values.items() if k not in _SUITE_SETS},
        grid,
        tasks=FLAGS.tasks,
        wnli=FLAGS.wnli,
        submission=FLAGS.submission,
        test_rows=None if FLAGS.check_test_rows else {},
    )


def main(argv):
    del argv
    from absl import flags

    from keras_bert.tasks.config import check_input_paths

    check_input_paths(flags.FLAGS.init_checkpoint, flags.FLAGS.vocab_file)
    results = run_suite(plan_from_flags())
    with open(os.path.join(flags.FLAGS.model_dir, RESULTS_MD)) as f:
        print(f.read())
    if results.get("submission"):
        print(results["submission"])


def console_main():
    """Entry point (`python -m keras_bert.tasks.glue_suite`, `keras-bert-glue`)."""
    from keras_bert import cli

    cli.run_command(__doc__, define_flags, ["data_dir", "model_dir"], main)


if __name__ == "__main__":
    console_main()
