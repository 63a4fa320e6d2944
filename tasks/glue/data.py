"""The GLUE benchmark's nine tasks, data side: the tasks' specs, examples and submission files.

Examples come from the files of the GLUE distribution (as `download_glue_data.py` lays them out:
one folder per task with train.tsv, dev.tsv and test.tsv; MNLI with dev_matched.tsv,
dev_mismatched.tsv, test_matched.tsv and test_mismatched.tsv; the diagnostic set AX in a sibling
folder, diagnostic/diagnostic.tsv) or from tensorflow-datasets (`glue/<task>`,
`keras_bert.tasks.glue.tfds_data`). The metrics are `keras_bert.tasks.glue.metrics`'.

Reading rules (the original run_classifier's processors, made strict):

- Fields are split on tabs without quote handling (the original's `csv.reader(f, delimiter="\\t",
  quotechar=None)`): sentences keep their raw quotes. Text is kept as written (no stripping).
- Columns are found by header name; CoLA's train and dev files have no header and fixed columns.
- Files are strict UTF-8: a bad byte is a `GlueDataError` naming the file and line (benchmark text
  is never silently altered). A UTF-8 byte-order mark (the MRPC files have one) is dropped.
- Blank lines are skipped. Every other row needs the header's number of fields, non-empty texts and
  a label from the task's label set (STS-B: a number in [0, 5]); anything else is a `GlueDataError`
  naming the file and line.
- Malformed rows: QQP's labelled files hold rows broken by stray newlines and tabs in the real
  distribution. There, rows that break a rule above are skipped and their count and first lines are
  logged (`skip_malformed=True` does the same for any task). Test splits never skip: a submission
  needs every row.

Example ids (`InputExample.guid`): the "index" column on test splits (the GLUE server matches
predictions by it), else "<split>-<line number in the file>" (tfds: "<split>-<idx>").
"""

import dataclasses
import difflib
import os
import posixpath

import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert.io_utils import write_atomic

SUBMISSION_HEADER = ("index", "prediction")
STSB_RANGE = (0.0, 5.0)

# Where the diagnostic set may sit, relative to the MNLI folder.
AX_FILES = ("diagnostic.tsv", "AX.tsv", os.path.join("..", "diagnostic", "diagnostic.tsv"))


class GlueDataError(ValueError):
    """Bad GLUE input: unknown task or split, missing file, malformed row, label or prediction."""


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example, as the original run_classifier's `InputExample`.

    Args:
        guid: str. Test splits: the file's index column (used in submission files); else
            "<split>-<line>".
        text_a: str, the first (or only) sentence.
        text_b: str or None, the second sentence of pair tasks.
        label: a label string from the task's label list, a float score for STS-B, None on test
            splits.
    """

    guid: str
    text_a: str
    text_b: str | None
    label: str | float | None


@dataclasses.dataclass(frozen=True)
class GlueSpec:
    """What the data layer knows about one GLUE task.

    Args:
        name: str, "cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte" or "wnli".
        labels: tuple of label strings (the original processors' lists), None for STS-B
            (regression).
        metrics: tuple of metric names `compute_metrics` returns.
        main_metric: str, the key that picks the best checkpoint (with an eval split's suffix).
        eval_splits: dict split name -> metric-name suffix ("" for a single dev split).
        predict_splits: dict split name -> submission file name.
        tfds_name: str, the tensorflow-datasets name ("glue/cola", ...).
        folder: str, the task's folder in the GLUE distribution ("CoLA", "SST-2", ...).
        text_columns: (text_a, text_b) header names; text_b None for single-sentence tasks. A name
            may be a tuple of accepted names (first present wins).
        label_column: str, header name of the label in train and dev files.
        index_column: str, header name of the example index in test files.
        headerless_columns: column names of train/dev files that have no header row (CoLA), else
            None.
        tfds_text_features: (text_a, text_b) tfds feature names; text_b None for single sentences.
        tfds_label_names: dict tfds ClassLabel name -> our label, where the two differ.
        skip_malformed: bool, skip (and log) malformed rows of labelled splits instead of raising.
    """

    name: str
    labels: tuple | None
    metrics: tuple
    main_metric: str
    eval_splits: dict
    predict_splits: dict
    tfds_name: str
    folder: str
    text_columns: tuple
    label_column: str
    index_column: str = "index"
    headerless_columns: tuple | None = None
    tfds_text_features: tuple = (None, None)
    tfds_label_names: dict = dataclasses.field(default_factory=dict)
    skip_malformed: bool = False

    @property
    def is_regression(self):
        """True for STS-B (a float score), False for classification tasks."""
        return self.labels is None

    @property
    def splits(self):
        """All split names: "train", the eval splits, then the predict splits."""
        return ("train", *self.eval_splits, *self.predict_splits)

    def file_names(self, split):
        """The file names that may hold `split`, relative to the task's folder, first match wins."""
        check_split(self, split)
        return AX_FILES if split == "ax" else (f"{split}.tsv",)


def _task(
    name,
    folder,
    labels,
    text_columns,
    label_column,
    tfds_text_features,
    metrics=("accuracy",),
    **kwargs,
):
    kwargs.setdefault("main_metric", metrics[0])
    kwargs.setdefault("eval_splits", {"dev": ""})
    kwargs.setdefault("predict_splits", {"test": f"{folder}.tsv"})
    return GlueSpec(
        name=name,
        labels=labels,
        metrics=metrics,
        tfds_name=f"glue/{name}",
        folder=folder,
        text_columns=text_columns,
        label_column=label_column,
        tfds_text_features=tfds_text_features,
        **kwargs,
    )


_BINARY = ("0", "1")
_NLI = ("entailment", "not_entailment")
_PAIR = ("sentence1", "sentence2")

SPECS = {
    spec.name: spec
    for spec in (
        _task(
            "cola",
            "CoLA",
            _BINARY,
            ("sentence", None),
            "label",
            ("sentence", None),
            metrics=("matthews_correlation",),
            headerless_columns=("source", "label", "original_label", "sentence"),
            tfds_label_names={"unacceptable": "0", "acceptable": "1"},
        ),
        # Some copies of SST-2 name the sentence column "text".
        _task(
            "sst2",
            "SST-2",
            _BINARY,
            (("sentence", "text"), None),
            "label",
            ("sentence", None),
            tfds_label_names={"negative": "0", "positive": "1"},
        ),
        _task(
            "mrpc",
            "MRPC",
            _BINARY,
            ("#1 String", "#2 String"),
            "Quality",
            _PAIR,
            metrics=("f1", "accuracy"),
            tfds_label_names={"not_equivalent": "0", "equivalent": "1"},
        ),
        _task("stsb", "STS-B", None, _PAIR, "score", _PAIR, metrics=("pearson", "spearman")),
        _task(
            "qqp",
            "QQP",
            _BINARY,
            ("question1", "question2"),
            "is_duplicate",
            ("question1", "question2"),
            metrics=("f1", "accuracy"),
            index_column="id",
            skip_malformed=True,
            tfds_label_names={"not_duplicate": "0", "duplicate": "1"},
        ),
        _task(
            "mnli",
            "MNLI",
            ("contradiction", "entailment", "neutral"),
            _PAIR,
            "gold_label",
            ("premise", "hypothesis"),
            main_metric="accuracy_matched",
            eval_splits={"dev_matched": "_matched", "dev_mismatched": "_mismatched"},
            predict_splits={
                "test_matched": "MNLI-m.tsv",
                "test_mismatched": "MNLI-mm.tsv",
                "ax": "AX.tsv",
            },
        ),
        _task("qnli", "QNLI", _NLI, ("question", "sentence"), "label", ("question", "sentence")),
        _task("rte", "RTE", _NLI, _PAIR, "label", _PAIR),
        _task(
            "wnli",
            "WNLI",
            _BINARY,
            _PAIR,
            "label",
            _PAIR,
            tfds_label_names={"not_entailment": "0", "entailment": "1"},
        ),
    )
}


def get_spec(name):
    """Looks up the spec of a GLUE task by name ("SST-2", "sst2" and "sst_2" all work); a
    `GlueSpec` passes through.

    Raises:
        GlueDataError: an unknown name, naming the closest valid one and the list.
    """
    if isinstance(name, GlueSpec):
        return name
    key = str(name).lower().replace("-", "").replace("_", "")
    if key in SPECS:
        return SPECS[key]
    closest = difflib.get_close_matches(key, SPECS, n=1, cutoff=0.0)
    raise GlueDataError(
        f"Unknown GLUE task {name!r}; did you mean {closest[0]!r}? Valid tasks: {', '.join(SPECS)}."
    )


def check_split(task, split):
    """Raises GlueDataError naming the valid splits if `task` has no split `split`."""
    if split not in task.splits:
        raise GlueDataError(
            f"GLUE task {task.name!r} has no split {split!r}; valid: {', '.join(task.splits)}."
        )


# === Local files ===


def read_examples(task, data_dir, split, skip_malformed=None, file=None):
    """Reads one split from the GLUE distribution's files.

    Args:
        task: task name or `GlueSpec`.
        data_dir: str or path, the task's folder (e.g. glue_data/MNLI) or the GLUE root holding it.
        split: str, one of `task.splits` ("train", "dev", "test"; MNLI "dev_matched", ..., "ax").
        skip_malformed: bool, skip and log malformed rows of labelled splits; None: the task's
            default (True for QQP only).
        file: str or None. Read this file (in `split`'s layout) instead of data_dir's.

    Returns:
        list of `InputExample`, in file order.

    Raises:
        GlueDataError: a missing file, or a bad row (named by file and line).
    """
    task = get_spec(task)
    path = file or find_file(task, data_dir, split)
    is_test = split in task.predict_splits
    skip = not is_test and (task.skip_malformed if skip_malformed is None else skip_malformed)
    rows = _rows(path)
    if task.headerless_columns and not is_test:
        header = task.headerless_columns
    else:
        header = next(rows, (1, None))[1]
        if header is None:
            raise GlueDataError(f"{path}:1: empty file, expected a header row.")
    text_positions = [_column(path, header, name) for name in task.text_columns]
    key_position = _column(path, header, task.index_column if is_test else task.label_column)
    examples, skipped = [], []
    for number, fields in rows:
        where = f"{path}:{number}"
        try:
            if len(fields) != len(header):
                raise GlueDataError(
                    f"{where}: expected {len(header)} tab-separated fields "
                    f"({', '.join(header)}), found {len(fields)}."
                )
            texts = [
                None if p is None else nonempty_text(fields[p], header[p], where)
                for p in text_positions
            ]
            if is_test:
                guid, label = (
                    nonempty_text(fields[key_position], header[key_position], where).strip(),
                    None,
                )
            else:
                guid, label = f"{split}-{number}", parse_label(task, fields[key_position], where)
            examples.append(InputExample(guid, texts[0], texts[1], label))
        except GlueDataError:
            if not skip:
                raise
            skipped.append(number)
    if skipped:
        logging.warning(
            "%s: skipped %d malformed rows (lines %s%s).",
            path,
            len(skipped),
            ", ".join(map(str, skipped[:10])),
            ", ..." if len(skipped) > 10 else "",
        )
    if not examples:
        raise GlueDataError(f"{path}: no examples ({len(skipped)} malformed rows skipped).")
    return examples


def find_file(task, data_dir, split):
    """The path of `split`'s file under `data_dir` (the task's folder or the GLUE root).

    Raises:
        GlueDataError: no such file, naming the places looked at and the expected file names.
    """
    task = get_spec(task)
    data_dir = os.fspath(data_dir)
    names = task.file_names(split)
    candidates = [
        _join(base, name) for base in (data_dir, _join(data_dir, task.folder)) for name in names
    ]
    for path in candidates:
        if tf.io.gfile.exists(path):
            return path
    raise GlueDataError(
        f"No {task.name} {split!r} file in {data_dir}: expected {' or '.join(names)} "
        f"(looked for {', '.join(candidates)})."
    )


def parse_label(task, value, where):
    """A label field as our label: a string of `task.labels`, or STS-B's float score in [0, 5].

    Raises:
        GlueDataError: a label outside the label set or a bad score, prefixed by `where`.
    """
    value = value.strip()
    if task.is_regression:
        try:
            score = float(value)
        except ValueError:
            raise GlueDataError(f"{where}: score {value!r} is not a number.") from None
        return check_score(score, where)
    if value not in task.labels:
        raise GlueDataError(f"{where}: label {value!r} is not one of {', '.join(task.labels)}.")
    return value


def check_score(score, where):
    if not STSB_RANGE[0] <= score <= STSB_RANGE[1]:  # Also rejects NaN.
        raise GlueDataError(f"{where}: score {score!r} is not in {list(STSB_RANGE)}.")
    return score


def _join(base, name):
    """`base`/`name` with ".." resolved, for local paths and gs:// alike."""
    scheme, sep, rest = base.rpartition("://")
    path = posixpath.normpath(posixpath.join(rest, name.replace(os.sep, "/")))
    return f"{scheme}{sep}{path}" if sep else os.path.normpath(os.path.join(base, name))


def _rows(path):
    """Yields (line number, fields) of a TSV file's non-blank lines: strict UTF-8, no quoting."""
    opener = tf.io.gfile.GFile if "://" in path else open
    with opener(path, "rb") as reader:
        for number, raw in enumerate(reader, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise GlueDataError(
                    f"{path}:{number}: invalid UTF-8 ({e.reason} at byte {e.start})."
                ) from e
            if number == 1:
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if line:
                yield number, line.split("\t")


def _column(path, header, names):
    """The position of the first of `names` (a name or a tuple of names) in `header`; None for
    None."""
    if names is None:
        return None
    for name in (names,) if isinstance(names, str) else names:
        if name in header:
            return header.index(name)
    raise GlueDataError(f"{path}:1: no column {names!r} in the header ({', '.join(header)}).")


def nonempty_text(value, name, where):
    if not value.strip():
        raise GlueDataError(f"{where}: empty {name!r}.")
    return value


# === Submission files ===


def write_submission(task, split, examples, predictions, output_dir):
    """Writes the GLUE server's file for a test split: "index<TAB>prediction", one row per example.

    Args:
        task: task name or `GlueSpec`.
        split: one of `task.predict_splits` (it names the file: "CoLA.tsv", "MNLI-m.tsv", "AX.tsv",
            ...).
        examples: the split's `InputExample`s (their guid is the test file's index).
        predictions: label strings, or STS-B scores (clipped to [0, 5], written with 3 decimals).
        output_dir: str or path, created if missing; local or gs://.

    Returns:
        str, the path written (atomically).
    """
    task = get_spec(task)
    if split not in task.predict_splits:
        raise GlueDataError(
            f"GLUE task {task.name!r} has no test split {split!r}; "
            f"valid: {', '.join(task.predict_splits)}."
        )
    if len(examples) != len(predictions):
        raise GlueDataError(f"{len(examples)} examples but {len(predictions)} predictions.")
    lines = ["\t".join(SUBMISSION_HEADER)]
    for example, prediction in zip(examples, predictions):
        if task.is_regression:
            score = float(prediction)
            if not np.isfinite(score):
                raise GlueDataError(f"Example {example.guid}: score {prediction!r} is not finite.")
            prediction = f"{np.clip(score, *STSB_RANGE):.3f}"
        elif prediction not in task.labels:
            raise GlueDataError(
                f"Example {example.guid}: prediction {prediction!r} is not one of "
                f"{', '.join(task.labels)}."
            )
        lines.append(f"{example.guid}\t{prediction}")
    output_dir = os.fspath(output_dir)
    tf.io.gfile.makedirs(output_dir)
    path = _join(output_dir, task.predict_splits[split])
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def read_submission(path):
    """Parses a submission file back.

    Returns:
        list of (index, prediction) str pairs, in file order.

    Raises:
        GlueDataError: a missing file, a wrong header or a row without exactly two fields.
    """
    path = os.fspath(path)
    if not tf.io.gfile.exists(path):
        raise GlueDataError(f"No such submission file: {path}.")
    rows = _rows(path)
    number, header = next(rows, (1, None))
    if header is None or tuple(header) != SUBMISSION_HEADER:
        raise GlueDataError(
            f"{path}:{number}: expected the header {chr(9).join(SUBMISSION_HEADER)!r}, "
            f"found {header!r}."
        )
    pairs = []
    for number, fields in rows:
        if len(fields) != 2:
            raise GlueDataError(
                f"{path}:{number}: expected 2 tab-separated fields, found {len(fields)}."
            )
        pairs.append((fields[0], fields[1]))
    return pairs
