"""SWAG on the runner (paper §4.4): four sequences per example, one score each, softmax over them.

Each example pairs its context `sent1` (segment A) with `sent2 + " " + ending_i` (segment B)
for i = 0..3, as the original BERT SWAG code (and Hugging Face's run_swag) did; a shared dense
layer on each sequence's pooled [CLS] gives the choice score (`BertMultipleChoice`).

The data are the official CSV files (rowanz/swagaf `data/`): `train.csv`, `val.csv` and the
unlabelled `test.csv`, with a header row `,video-id,fold-ind,startphrase,sent1,sent2,gold-source,
ending0,ending1,ending2,ending3,label` (the first, unnamed column is the row index). Columns are
found by name; tensorflow-datasets has no SWAG.

Dimensions: N examples, K = 4 choices, L tokens (ragged).
"""

import csv
import dataclasses
import io
import os

import numpy as np
import tensorflow as tf
from sklearn import metrics as sk_metrics

from keras_bert.io_utils import write_atomic
from keras_bert.models.task_models import BertMultipleChoice
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.definition import TaskDefinition

NUM_CHOICES = 4
FILE_NAMES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}
TEXT_COLUMNS = ("sent1", "sent2") + tuple(f"ending{i}" for i in range(NUM_CHOICES))
ID_COLUMNS = ("", "video-id", "fold-ind")  # "" is the official files' unnamed row index.


class SwagDataError(ValueError):
    """A SWAG CSV file that cannot be read; the message names the file and record."""


@dataclasses.dataclass
class SwagExample:
    """One SWAG question.

    Args:
        ids: dict of the record's identifying columns present in the file (row index "",
            "video-id", "fold-ind"); "" falls back to the record number.
        context: str, `sent1`. start: str, `sent2` (the endings' common beginning).
        endings: tuple of the 4 endings. label: int in 0..3, or None when unlabelled.
    """

    ids: dict
    context: str
    start: str
    endings: tuple
    label: int | None = None

    def choices(self):
        """The K (segment A, segment B) pairs."""
        return [(self.context, " ".join(t for t in (self.start, e) if t)) for e in self.endings]


def read_swag(path, labelled=True):
    """Reads an official SWAG CSV file.

    Args:
        path: str, local or gs:// path.
        labelled: bool. The file must have a `label` column (train, val).

    Returns:
        list of `SwagExample` in file order.

    Raises:
        SwagDataError: naming the file and record: a missing column, a record with another
            number of fields than the header, an empty text, a label outside 0..3.
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SwagDataError(f"{path}: not UTF-8 ({e}).") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise SwagDataError(
            f"{path}: empty file (expected a header row with {', '.join(TEXT_COLUMNS)}, label)."
        )
    needed = TEXT_COLUMNS + (("label",) if labelled else ())
    missing = [c for c in needed if c not in header]
    if missing:
        raise SwagDataError(
            f"{path}: missing column(s) {', '.join(missing)} (header: {','.join(header)})."
        )
    column = {name: header.index(name) for name in header}
    examples = []
    while True:
        line = reader.line_num + 1  # The record's first line (a quoted field may hold newlines).
        row = next(reader, None)
        if row is None:
            break
        if not row:  # A blank line.
            continue
        number = len(examples) + 1
        where = f"{path} record {number} (line {line})"
        if len(row) != len(header):
            raise SwagDataError(f"{where}: {len(row)} fields, the header has {len(header)}.")
        texts = {name: row[column[name]].strip() for name in TEXT_COLUMNS}
        empty = [name for name in ("sent1",) + TEXT_COLUMNS[2:] if not texts[name]]
        if empty:
            raise SwagDataError(f"{where}: empty {', '.join(empty)}.")
        label = None
        if "label" in column and (labelled or row[column["label"]].strip()):
            label = _label(row[column["label"]], where)
        ids = {name: row[column[name]] for name in ID_COLUMNS if name in column}
        ids.setdefault("", str(number - 1))
        examples.append(
            SwagExample(
                ids,
                texts["sent1"],
                texts["sent2"],
                tuple(texts[f"ending{i}"] for i in range(NUM_CHOICES)),
                label,
            )
        )
    if not examples:
        raise SwagDataError(f"{path}: no records after the header.")
    return examples


def _label(value, where):
    try:
        label = int(value.strip())
    except ValueError:
        label = None
    if label is None or not 0 <= label < NUM_CHOICES:
        raise SwagDataError(
            f"{where}: label {value!r} is not an ending index 0..{NUM_CHOICES - 1}."
        )
    return label


class SwagTask(TaskDefinition):
    """SWAG multiple choice for the fine-tuning runner (the paper: lr 2e-5, batch 16, 3 epochs).

    Args:
        name: str, the task name ("swag").
    """

    main_metric = "accuracy"
    eval_splits = {"dev": ""}
    predict_splits = {"test": "test_predictions.csv"}
    label_outputs = {"label": "logits"}
    recipe = {"learning_rate": 2e-5, "batch_size": 16, "num_train_epochs": 3}

    def __init__(self, name="swag"):
        self.name = name

    def read(self, data_dir, split, use_tfds=False, file=None):
        if split not in FILE_NAMES:
            raise ValueError(f"Unknown SWAG split {split!r}; splits: {', '.join(FILE_NAMES)}.")
        if use_tfds:
            raise ValueError(
                "tensorflow-datasets has no SWAG: pass data_dir with the official train.csv and "
                "val.csv (github.com/rowanz/swagaf, data/)."
            )
        if not file and not data_dir:
            raise ValueError(
                f"SWAG needs data_dir (with {FILE_NAMES[split]}) or train_file/eval_file."
            )
        return read_swag(
            file or os.path.join(data_dir, FILE_NAMES[split]), labelled=split != "test"
        )

    def encode(self, examples, tokenizer, seq_length, training=False):
        """Inputs [N, K, (L)]: the K pairs of each example packed as [CLS] A [SEP] B [SEP]
        (longest-first truncation); label [N] when every example has one."""
        pairs = [pair for e in examples for pair in e.choices()]
        flat = feature_lib.encode_texts(
            tokenizer, seq_length, [a for a, _ in pairs], [b for _, b in pairs]
        )
        inputs = {
            k: tf.RaggedTensor.from_uniform_row_length(v, NUM_CHOICES) for k, v in flat.items()
        }  # (N, K, (L))
        labels = {}
        if examples and all(e.label is not None for e in examples):
            labels["label"] = np.array([e.label for e in examples], np.int32)
        return feature_lib.FeatureSet(inputs, labels)

    def build_model(self, encoder, dropout):
        return BertMultipleChoice(encoder, dropout=dropout)

    def evaluate(self, examples, features, outputs):
        predicted = np.argmax(outputs["logits"], axis=-1)
        return {"accuracy": sk_metrics.accuracy_score([e.label for e in examples], predicted)}

    def write_predictions(self, split, examples, features, outputs, output_dir):
        """A CSV: the example's id columns, the predicted ending and the 4 probabilities."""
        logits = np.asarray(outputs["logits"], np.float64)
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        id_columns = [c for c in ID_COLUMNS if examples and c in examples[0].ids]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            [c or "id" for c in id_columns]
            + ["prediction"]
            + [f"prob{i}" for i in range(NUM_CHOICES)]
        )
        for e, p in zip(examples, probs):
            writer.writerow(
                [e.ids[c] for c in id_columns] + [int(np.argmax(p))] + [f"{v:.6f}" for v in p]
            )
        path = os.path.join(output_dir, self.predict_splits[split])
        write_atomic(path, out.getvalue())
        return [path]

    def serving_row(self, example):
        """The context, then each ending after the common start."""
        return (
            example.context,
            *(" ".join(filter(None, (example.start, e))) for e in example.endings),
        )

    def info(self):
        return {
            "problem": "multiple_choice",
            "num_choices": NUM_CHOICES,
            "labels": list(range(NUM_CHOICES)),
            "text_inputs": ["sent1", "sent2", "endings"],
            "pairing": (
                "segment A: sent1; segment B: sent2 + ' ' + ending<i>, one sequence per ending"
            ),
        }
