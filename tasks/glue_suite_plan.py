"""The GLUE suite's plan (`keras_bert.tasks.glue_suite`): the tasks asked for, their data checked
(folders, files, the test files' rows and ids), and per task its `FinetuneConfig` and sweep grid
(`plan_suite`, `SuitePlan`)."""

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from keras_bert.tasks import sweep
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.registry import GLUE_TASKS

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
