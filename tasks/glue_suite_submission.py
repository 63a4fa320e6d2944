"""The GLUE suite's submission (`keras_bert.tasks.glue_suite`): `glue_submission.zip` from the
tasks' best runs' prediction files, each checked as the GLUE server checks it."""

import io
import os
import zipfile
from collections.abc import Sequence
from typing import Any

from absl import logging

from keras_bert.tasks import sweep
from keras_bert.tasks.glue_suite_plan import TEST_ROWS, SuitePlan

SUBMISSION = "glue_submission.zip"


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
