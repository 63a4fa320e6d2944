"""Your own single-text classification data on the runner: `label<TAB>text` files.

    python -m keras_bert.tasks.finetune --task=text_classification --data_dir=my_data \\
        --init_checkpoint=... --model_dir=runs/mine --do_train --do_eval [--do_predict]

`data_dir` holds `train.tsv` and `dev.tsv` (or pass `train_file` / `eval_file`), and for
`do_predict` `test.tsv`. A line is `label<TAB>text`: no quoting, text kept as written; a first
line reading exactly `label<TAB>text` is a header and skipped, as are blank lines. Test lines
may be the text alone. The label set is the training file's labels, sorted (it is read from
`train.tsv` in data_dir, or from `train_file` once the training split is read); a dev label
outside it is an error. Files are strict UTF-8; a bad line is a `TextClassificationDataError`
naming the file and line.

Metrics: accuracy (the main metric) and macro-averaged F1. Predictions:
`predictions/test_results.tsv`, `index<TAB>prediction` (the test file's line number, the
label). The model is a `BertClassifier` on `pooled_output`; it exports like the GLUE single
sentence tasks (one `text` input; `keras_bert.export`).
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf
from sklearn import metrics as sk_metrics

from keras_bert.io_utils import write_atomic
from keras_bert.models.task_models import BertClassifier
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.task import Task, sparse_xent_sums

HEADER = ("label", "text")
PREDICTIONS_FILE = "test_results.tsv"


class TextClassificationDataError(ValueError):
    """A missing file or a bad line of a text classification TSV file."""


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One line: `guid` "<split>-<line number>", its `text` and `label` (None on unlabelled test
    lines)."""

    guid: str
    text: str
    label: str | None


def read_tsv(path, split="train", require_labels=True):
    """The examples of a `label<TAB>text` file (see the module docstring).

    Args:
        path: str, a local or gs:// file.
        split: str, the split name used in the examples' guids.
        require_labels: bool. False lets lines be the text alone (label None).

    Raises:
        TextClassificationDataError: a missing or empty file, invalid UTF-8, a line with
            more than two fields, an empty label or text (naming the file and line).
    """
    path = os.fspath(path)
    if not tf.io.gfile.exists(path):
        raise TextClassificationDataError(
            f"No such file: {path} (expected lines of label<TAB>text)."
        )
    examples = []
    with tf.io.gfile.GFile(path, "rb") as reader:
        for number, raw in enumerate(reader, start=1):
            where = f"{path}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TextClassificationDataError(
                    f"{where}: invalid UTF-8 ({e.reason} at byte {e.start})."
                ) from e
            line = line.removeprefix("\ufeff") if number == 1 else line
            line = line.rstrip("\r\n")
            if not line.strip() or (number == 1 and tuple(line.split("\t")) == HEADER):
                continue
            fields = line.split("\t")
            if len(fields) == 1 and not require_labels:
                label, text = None, fields[0]
            elif len(fields) == 2:
                label, text = fields[0].strip(), fields[1]
                if not label:
                    raise TextClassificationDataError(f"{where}: empty label.")
            else:
                raise TextClassificationDataError(
                    f"{where}: expected label<TAB>text, found {len(fields)} tab-separated field(s)."
                )
            if not text.strip():
                raise TextClassificationDataError(f"{where}: empty text.")
            examples.append(TextExample(f"{split}-{number}", text, label))
    if not examples:
        raise TextClassificationDataError(f"{path}: no examples.")
    return examples


class TextClassification(Task):
    """Single-text classification with the labels of the user's training file.

    Args:
        name: str, the registry name ("text_classification").
    """

    main_metric = "accuracy"
    predict_splits = {"test": PREDICTIONS_FILE}
    label_keys = ("label",)

    def __init__(self, name="text_classification"):
        self.name = name
        self.labels = None  # Sorted training labels, known once the training file is read.

    def read(self, data_dir, split, use_tfds=False, file=None):
        if use_tfds:
            raise ValueError(
                f"Task {self.name} reads your own files (data_dir or train_file/eval_file), "
                f"not tensorflow-datasets."
            )
        if file is None and not data_dir:
            raise ValueError(
                f"Task {self.name} needs data_dir (with train.tsv, dev.tsv, test.tsv) or "
                f"train_file/eval_file."
            )
        path = file or os.path.join(data_dir, f"{split}.tsv")
        examples = read_tsv(path, split, require_labels=split not in self.predict_splits)
        if split == self.train_split:
            self.labels = sorted({e.label for e in examples})
        elif (
            self.labels is None
            and data_dir
            and tf.io.gfile.exists(os.path.join(data_dir, "train.tsv"))
        ):
            self.labels = sorted({e.label for e in read_tsv(os.path.join(data_dir, "train.tsv"))})
        if self.labels is not None and split != self.train_split:
            for e in examples:
                if e.label is not None and e.label not in self.labels:
                    raise TextClassificationDataError(
                        f"{path}:{e.guid.rpartition('-')[2]}: label {e.label!r} is not in the "
                        f"training file's labels ({', '.join(self.labels)})."
                    )
        return examples

    def encode(self, examples, tokenizer, seq_length, training=False):
        inputs = feature_lib.encode_texts(tokenizer, seq_length, [e.text for e in examples])
        labels = {}
        if self.labels is not None and examples and all(e.label is not None for e in examples):
            index = {label: i for i, label in enumerate(self.labels)}
            labels["label"] = np.array([index[e.label] for e in examples], np.int32)
        return feature_lib.FeatureSet(inputs, labels)

    def build_model(self, encoder, dropout):
        if not self.labels:
            raise ValueError(
                f"Task {self.name} takes its labels from the training file: read the train split "
                f"first (data_dir with train.tsv, or train_file)."
            )
        return BertClassifier(encoder, num_classes=len(self.labels), dropout=dropout)

    def loss_sums(self, labels, outputs):
        return sparse_xent_sums(labels["label"], outputs["logits"])

    def predictions(self, outputs):
        """Label strings from the model outputs."""
        return [self.labels[i] for i in np.argmax(outputs["logits"], axis=-1)]

    def evaluate(self, examples, features, outputs):
        gold, predicted = [e.label for e in examples], self.predictions(outputs)
        return {
            "accuracy": float(sk_metrics.accuracy_score(gold, predicted)),
            "macro_f1": float(
                sk_metrics.f1_score(
                    gold, predicted, labels=self.labels, average="macro", zero_division=0.0
                )
            ),
        }

    def write_predictions(self, split, examples, features, outputs, output_dir):
        lines = ["index\tprediction"] + [
            f"{e.guid.rpartition('-')[2]}\t{label}"
            for e, label in zip(examples, self.predictions(outputs))
        ]
        path = os.path.join(output_dir, self.predict_splits[split])
        write_atomic(path, "\n".join(lines) + "\n")
        return [path]

    def info(self):
        return {
            "problem": "classification",
            "labels": list(self.labels or []),
            "text_inputs": ["text"],
        }
