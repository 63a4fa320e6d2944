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
import dataclasses
import io
import json
import os
import statistics
import time
import zipfile
from collections.abc import Callable, Sequence
from typing import Any

from absl import logging

from keras_bert.tasks import sweep
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.registry import GLUE_TASKS

SUBMISSION = "glue_submission.zip"
RESULTS_JSON, RESULTS_MD, RESULTS_PNG = "results.json", "results.md", "results.png"
WNLI_MODES = ("majority", "train")
# Rows of each test file of the GLUE distribution (its ids are 0..n-1), by submission file.
TEST_ROWS = {
    "CoLA.tsv": 1063,
    "SST-2.tsv": 1821,
    "MRPC.tsv": 1725,
    "STS-B.tsv": 1379,
    "QQP.tsv": 390965,
    "MNLI-m.tsv": 9796,
    "MNLI-mm.tsv": 9847,
    "QNLI.tsv": 5463,
    "RTE.tsv": 3000,
    "WNLI.tsv": 146,
    "AX.tsv": 1104,
}
# The paper's Table 1 columns: (column, task, our metric key), and its GLUE test numbers
# (BERT-base, BERT-large). WNLI: the majority class, 65.1, left out of the average.
COLUMNS = (
    ("MNLI-m", "mnli", "accuracy_matched"),
    ("MNLI-mm", "mnli", "accuracy_mismatched"),
    ("QQP", "qqp", "f1"),
    ("QNLI", "qnli", "accuracy"),
    ("SST-2", "sst2", "accuracy"),
    ("CoLA", "cola", "matthews_correlation"),
    ("STS-B", "stsb", "spearman"),
    ("MRPC", "mrpc", "f1"),
    ("RTE", "rte", "accuracy"),
    ("WNLI", "wnli", "accuracy"),
)
PAPER_TEST = {
    "MNLI-m": (84.6, 86.7),
    "MNLI-mm": (83.4, 85.9),
    "QQP": (71.2, 72.1),
    "QNLI": (90.5, 92.7),
    "SST-2": (93.5, 94.9),
    "CoLA": (52.1, 60.5),
    "STS-B": (85.8, 86.5),
    "MRPC": (88.9, 89.3),
    "RTE": (66.4, 70.1),
    "WNLI": (65.1, 65.1),
}


def parse_tasks(tasks: str | Sequence[str] | None) -> tuple[str, ...]:
    """GLUE task names from "cola,MRPC,SST-2" (any spelling `glue.get_spec` takes), in GLUE order;
    None for all nine. Raises ValueError for an unknown or empty list."""
    from keras_bert.tasks.glue import data as glue

    if tasks is None:
        return GLUE_TASKS
    items = tasks.split(",") if isinstance(tasks, str) else list(tasks)
    names = {glue.get_spec(t.strip()).name for t in items if t.strip()}
    if not names:
        raise ValueError("tasks lists no GLUE task.")
    return tuple(t for t in GLUE_TASKS if t in names)


def check_data(
    data_dir: str,
    tasks: Sequence[str],
    submission: bool = True,
    test_rows: dict[str, int] | None = None,
) -> None:
    """Raises `GlueDataError` for the first problem of the GLUE folder for `tasks`: a task's folder
    or file missing (naming the task, and the tasks that are there), or, with `submission`, a test
    file whose row count or ids (0..n-1 in order) differ from the distributed one (`test_rows`,
    default `TEST_ROWS`; None entries are not checked)."""
    from keras_bert.tasks.glue import data as glue

    test_rows = TEST_ROWS if test_rows is None else test_rows
    present = [t for t in GLUE_TASKS if os.path.isdir(os.path.join(data_dir, glue.SPECS[t].folder))]
    for task in tasks:
        spec = glue.SPECS[task]
        splits = ["train", *spec.eval_splits] + (list(spec.predict_splits) if submission else [])
        for split in splits:
            try:
                glue.find_file(spec, os.path.join(data_dir, spec.folder), split)
            except glue.GlueDataError as error:
                others = [t for t in tasks if t in present and t != task]
                hint = f"; run the others with --tasks={','.join(others)}" if others else ""
                raise glue.GlueDataError(
                    f"GLUE task {spec.folder} ({task}) is missing from {data_dir}: {error}"
                    f"{hint} (tasks there: {', '.join(present) or 'none'})."
                ) from None
    for task in tasks if submission else ():
        spec = glue.SPECS[task]
        for split, file in spec.predict_splits.items():
            _check_test_file(spec, os.path.join(data_dir, spec.folder), split, test_rows.get(file))


def _check_test_file(spec, folder, split, rows):
    from keras_bert.tasks.glue import data as glue

    path = glue.find_file(spec, folder, split)
    ids = [e.guid for e in glue.read_examples(spec, folder, split)]
    if rows is not None and len(ids) != rows:
        raise glue.GlueDataError(
            f"{path}: {len(ids)} test rows, but the distributed {spec.predict_splits[split]} "
            f"test set has {rows}: the GLUE server would reject the submission."
        )
    wrong = next((i for i, guid in enumerate(ids) if guid != str(i)), None)
    if wrong is not None:
        raise glue.GlueDataError(
            f"{path}: row {wrong + 1} has id {ids[wrong]!r}, expected {wrong}: the distributed "
            f"test file's ids are 0..{len(ids) - 1} in order."
        )


@dataclasses.dataclass
class SuitePlan:
    """What a suite runs: per task its `FinetuneConfig` and `sweep.Grid` (WNLI majority: none)."""

    data_dir: str
    model_dir: str
    tasks: tuple[str, ...]
    configs: dict[str, FinetuneConfig]
    grids: dict[str, sweep.Grid]
    wnli: str
    submission: bool
    train_examples: dict[str, int] = dataclasses.field(default_factory=dict)  # In the file.


def plan_suite(
    data_dir: str,
    model_dir: str,
    settings: dict[str, Any],
    grid: dict[str, Any] | None = None,
    tasks: str | Sequence[str] | None = None,
    wnli: str = "majority",
    submission: bool = True,
    test_rows: dict[str, int] | None = None,
) -> SuitePlan:
    """Checks everything (names, data, settings, grid) and returns the `SuitePlan`; writes nothing.

    Args:
        data_dir: the GLUE root (CoLA/, SST-2/, ..., diagnostic/).
        model_dir: the suite's output directory.
        settings: `FinetuneConfig` fields for every run (init_checkpoint, seq_length, ...), not
            task, data_dir, model_dir or the do_* switches.
        grid: `sweep.make_grid` keyword arguments (learning_rates, ..., restarts).
        tasks: see `parse_tasks`. wnli: "majority" (the paper) or "train" (a sweep like the
            others). submission: predict the test sets and write the zip.
        test_rows: see `check_data`.
    """
    if wnli not in WNLI_MODES:
        raise ValueError(f"wnli must be one of {', '.join(WNLI_MODES)}, got {wnli!r}.")
    for name in ("task", "data_dir", "model_dir", "do_train", "do_eval", "do_predict"):
        if name in settings:
            raise ValueError(f"The suite sets {name} itself; do not pass it.")
    names = parse_tasks(tasks)
    if not os.path.isdir(data_dir):
        raise NotADirectoryError(f"data_dir={data_dir} is not a directory (the GLUE folders).")
    check_data(data_dir, names, submission, test_rows)
    configs, grids = {}, {}
    for task in names:
        configs[task] = FinetuneConfig(
            **settings,
            task=task,
            data_dir=os.path.join(data_dir, _folder(task)),
            model_dir=os.path.join(model_dir, task),
            do_train=True,
            do_eval=True,
            do_predict=submission,
        )
        if not (task == "wnli" and wnli == "majority"):
            grids[task] = sweep.make_grid(configs[task], **(grid or {}))
    from keras_bert.tasks.glue import data as glue

    sizes = {t: len(glue.read_examples(t, configs[t].data_dir, "train")) for t in names}
    return SuitePlan(data_dir, model_dir, names, configs, grids, wnli, submission, sizes)


def _folder(task):
    from keras_bert.tasks.glue import data as glue

    return glue.SPECS[task].folder


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
        results = _report(plan, results)
    if plan.submission:
        results["submission"] = write_submission_zip(plan, results)
        results = _report(plan, results)
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

    config, spec = plan.configs[task], glue.SPECS[task]
    train = glue.read_examples(spec, config.data_dir, "train")
    counts = collections.Counter(e.label for e in train)
    label = max(spec.labels, key=lambda value: (counts[value], -spec.labels.index(value)))
    dev = glue.read_examples(spec, config.data_dir, "dev")
    metrics = glue.compute_metrics(spec, [e.label for e in dev], [label] * len(dev))
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


def write_submission_zip(plan: SuitePlan, results: dict[str, Any]) -> str:
    """`glue_submission.zip` from the tasks' best runs' prediction files, checked (header, one row
    per test example with the test file's ids, labels of the task's vocabulary) as the GLUE server
    checks them; written atomically. Returns its path."""
    from keras_bert.tasks.glue import data as glue

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for task in plan.tasks:
            spec = glue.SPECS[task]
            for split, name in spec.predict_splits.items():
                path = results["tasks"][task]["predictions"][name]
                test = glue.read_examples(spec, plan.configs[task].data_dir, split)
                check_submission_file(task, path, [e.guid for e in test])
                with open(path, "rb") as f:
                    archive.writestr(name, f.read())
    path = os.path.join(plan.model_dir, SUBMISSION)
    sweep.write_file(path, buffer.getvalue())
    missing = sorted(
        set(TEST_ROWS) - {n for t in plan.tasks for n in glue.SPECS[t].predict_splits.values()}
    )
    if missing:
        logging.warning(
            "%s lacks %s: the GLUE server needs every task's file.", path, ", ".join(missing)
        )
    return path


def check_submission_file(task: str, path: str, ids: Sequence[str]) -> None:
    """Raises GlueDataError unless `path` is a GLUE server file of `task`: the header
    `index<TAB>prediction`, the `ids` in order, and each prediction in the task's label vocabulary
    (STS-B: a number in [0, 5])."""
    from keras_bert.tasks.glue import data as glue

    spec = glue.SPECS[task]
    pairs = glue.read_submission(path)
    if [i for i, _ in pairs] != list(ids):
        raise glue.GlueDataError(
            f"{path}: {len(pairs)} rows whose ids are not the {len(ids)} test ids in order."
        )
    for number, (_, prediction) in enumerate(pairs, start=2):
        glue.parse_label(spec, prediction, f"{path}:{number}")


# === The report ===


def _report(plan, results):
    """Adds the averages and the paper's numbers to `results`, writes results.json, .md, .png."""
    results = dict(results)
    results["columns"] = _columns(results["tasks"])
    results["average_without_wnli"] = _average(results["columns"])
    results["settings"] = {
        "data_dir": plan.data_dir,
        "tasks": list(plan.tasks),
        "wnli": plan.wnli,
        "grids": {t: dataclasses.asdict(g) for t, g in plan.grids.items()},
    }
    sweep.write_file(os.path.join(plan.model_dir, RESULTS_JSON), json.dumps(results, indent=1))
    sweep.write_file(os.path.join(plan.model_dir, RESULTS_MD), render_markdown(results))
    _plot(plan, results)
    return results


def _columns(tasks):
    """The paper's Table 1 columns of the tasks run: ours (dev, x100) beside the paper's test."""
    columns = []
    for column, task, key in COLUMNS:
        if task in tasks:
            base, large = PAPER_TEST[column]
            score = tasks[task]["dev"].get(key)
            columns.append(
                {
                    "column": column,
                    "task": task,
                    "metric": key,
                    "dev": None if score is None else 100 * score,
                    "paper_base_test": base,
                    "paper_large_test": large,
                }
            )
    return columns


def _average(columns):
    """Our dev average and the paper's test averages over the same columns, WNLI left out (as the
    paper's Table 1 "Average": 79.6 base, 82.1 large over all nine columns)."""
    kept = [c for c in columns if c["task"] != "wnli" and c["dev"] is not None]
    if not kept:
        return None
    return {
        "columns": [c["column"] for c in kept],
        "dev": statistics.fmean(c["dev"] for c in kept),
        "paper_base_test": statistics.fmean(c["paper_base_test"] for c in kept),
        "paper_large_test": statistics.fmean(c["paper_large_test"] for c in kept),
    }


def render_markdown(results: dict[str, Any]) -> str:
    """results.md: one row per paper column (ours on dev, the best run's setting, the spread of its
    setting across seeds, the paper's BERT-base and -large test numbers), then the averages."""
    lines = [
        "| task | metric | ours (dev) | best lr | batch | epochs | optimizer | best seed | "
        "seeds: mean ± std (min-max) | runs | paper BERT-base (test) | paper BERT-large (test) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results["columns"]:
        record = results["tasks"][c["task"]]
        setting = record["best_setting"]
        seeds = record["seeds"]
        named = f"{record['metric']} " if record["metric"] != c["metric"] else ""
        spread = (
            f"{named}{100 * seeds['mean']:.2f} ± {100 * seeds['std']:.2f} "
            f"({100 * seeds['min']:.2f}-{100 * seeds['max']:.2f}, {seeds['count']} seeds)"
            if seeds
            else "-"
        )
        row = [
            c["column"],
            c["metric"],
            _cell(c["dev"]),
            *_setting_cells(setting),
            spread,
            str(len(record["runs"])),
            _cell(c["paper_base_test"]),
            _cell(c["paper_large_test"]),
        ]
        lines.append("| " + " | ".join(row) + " |")
    average = results.get("average_without_wnli")
    if average:
        lines += [
            "",
            f"GLUE average without WNLI over {', '.join(average['columns'])}: ours (dev) "
            f"{average['dev']:.2f}; paper BERT-base (test) {average['paper_base_test']:.2f}, "
            f"BERT-large (test) {average['paper_large_test']:.2f}.",
        ]
    capped = [
        f"{t} {r['train_examples_used']:,} of {r['train_examples']:,}"
        for t, r in results["tasks"].items()
        if r["train_examples_used"] < r["train_examples"]
    ]
    if capped:
        lines += ["", f"Training sets capped (max_train_examples): {', '.join(capped)}."]
    lines += [
        "",
        "Each task's best run is chosen on dev by its main metric (STS-B: Pearson; MNLI: matched "
        "accuracy); the spread is that metric across the seeds of the best setting. The paper's "
        "numbers are GLUE test scores (Table 1).",
    ]
    return "\n".join(lines) + "\n"


def _setting_cells(setting):
    """The best lr, batch, epochs, optimizer and seed cells (WNLI majority: "majority class 0")."""
    if "majority_class" in setting:
        return [f"majority class {setting['majority_class']}", "-", "-", "-", "-"]
    return [
        f"{setting['learning_rate']:g}",
        *(str(setting[k]) for k in ("batch_size", "num_train_epochs", "optimizer", "seed")),
    ]


def _cell(value):
    return "-" if value is None else f"{value:.2f}"


def _plot(plan, results):
    from keras_bert.training import plots

    panels = []
    for task in plan.tasks:
        record = results["tasks"].get(task)
        if record and record["runs"]:
            points = [
                (
                    r["setting"]["learning_rate"],
                    r["setting"]["seed"],
                    100 * r["score"],
                    _others(r["setting"]),
                )
                for r in record["runs"]
            ]
            panels.append((task, record["metric"], points))
    if panels:
        plots.plot_sweeps(panels, os.path.join(plan.model_dir, RESULTS_PNG), title="GLUE dev")


def _others(setting):
    """The non-lr, non-seed part of a setting, as a short label ("" when the grid has one)."""
    return f"bs{setting['batch_size']} ep{setting['num_train_epochs']} {setting['optimizer']}"


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
