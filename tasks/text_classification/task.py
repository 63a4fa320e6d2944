"""Your own text or text-pair classification data on the runner: `label<TAB>text` files, or
`label<TAB>text_a<TAB>text_b` for pairs (paraphrase, entailment, query-document).

    python -m keras_bert.tasks.finetune --task=text_classification --data_dir=my_data \\
        --init_checkpoint=... --model_dir=runs/mine --do_train --do_eval [--do_predict]

`data_dir` holds `train.tsv` and `dev.tsv` (or pass `train_file` / `eval_file`), and for
`do_predict` `test.tsv`. A line is `label<TAB>text`: no quoting, text kept as written; a first
line reading exactly `label<TAB>text` is a header and skipped, as are blank lines. Test lines
may be the text alone. A pairs file has three fields on every line, `label<TAB>text_a<TAB>text_b`
(header `label<TAB>text_a<TAB>text_b`; test lines may be `text_a<TAB>text_b`): the training
file's first line decides, and every file of the run must then be of its kind. The label set
is the training file's labels, sorted (it is read from `train.tsv` in data_dir, or from
`train_file` once the training split is read); a dev label outside it is an error. Files are
strict UTF-8; a bad line is a `TextClassificationDataError` naming the file and line.

Metrics: accuracy (the main metric) and macro-averaged F1. Predictions:
`predictions/test_results.tsv`, `index<TAB>prediction` (the test file's line number, the
label). The model is a `BertClassifier` on `pooled_output`; it exports like the GLUE tasks
(`text`, and `text_b` for pairs; `keras_bert.export`). Long texts are truncated, or read in
windows (`keras_bert.tasks.long_text`: for pairs, text_b is windowed beside text_a).
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf
from sklearn import metrics as sk_metrics

from keras_bert.io_utils import write_atomic
from keras_bert.models.documents import DocumentClassifier
from keras_bert.models.task_models import BertClassifier
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.definition import TaskDefinition
from keras_bert.tasks.long_text import LongTextOptions, document_level
from keras_bert.text.window_sizes import resolve_stride

HEADER = ("label", "text")
PAIR_HEADER = ("label", "text_a", "text_b")
PREDICTIONS_FILE = "test_results.tsv"


class TextClassificationDataError(ValueError):
    """A missing file or a bad line of a text classification TSV file."""


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One line: `guid` "<split>-<line number>", its `text` (a pair's first), `label` (None on
    unlabelled test lines) and a pair's second text `text_b` (else None)."""

    guid: str
    text: str
    label: str | None
    text_b: str | None = None


def read_tsv(path, split="train", require_labels=True, pair=None):
    """The examples of a `label<TAB>text` or `label<TAB>text_a<TAB>text_b` file (see the module
    docstring).

    Args:
        path: str, a local or gs:// file.
        split: str, the split name used in the examples' guids.
        require_labels: bool. False lets lines be the text(s) alone (label None).
        pair: bool or None. Whether the file holds pairs; None: as its first line says (a
            labelled file: 2 or 3 fields; an unlabelled one is read as single texts).

    Raises:
        TextClassificationDataError: a missing or empty file, invalid UTF-8, a line with
            another number of fields than its kind's, an empty label or text (naming the file
            and line).
    """
    path = os.fspath(path)
    if not tf.io.gfile.exists(path):
        raise TextClassificationDataError(
            f"No such file: {path} (expected lines of label<TAB>text, or "
            f"label<TAB>text_a<TAB>text_b for pairs)."
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
            fields = line.rstrip("\r\n").split("\t")
            if not line.strip():
                continue
            if pair is None:
                pair = len(fields) == 3 and (require_labels or tuple(fields) == PAIR_HEADER)
            if number == 1 and tuple(fields) == (PAIR_HEADER if pair else HEADER):
                continue
            examples.append(_example(fields, split, number, where, require_labels, pair))
    if not examples:
        raise TextClassificationDataError(f"{path}: no examples.")
    return examples


def _example(fields, split, number, where, require_labels, pair):
    """The `TextExample` of one line's fields; raises naming the line for a bad one."""
    texts = 2 if pair else 1
    if len(fields) == texts + 1:
        label, fields = fields[0].strip(), fields[1:]
        if not label:
            raise TextClassificationDataError(f"{where}: empty label.")
    elif len(fields) == texts and not require_labels:
        label = None
    else:
        kind = "label<TAB>text_a<TAB>text_b (a pairs file)" if pair else "label<TAB>text"
        raise TextClassificationDataError(
            f"{where}: expected {kind}, found {len(fields)} tab-separated field(s) (every line "
            f"has the kind of the training file's first)."
        )
    for name, text in zip(("text_a", "text_b") if pair else ("text",), fields):
        if not text.strip():
            raise TextClassificationDataError(f"{where}: empty {name}.")
    return TextExample(f"{split}-{number}", fields[0], label, fields[1] if pair else None)


class TextClassification(TaskDefinition):
    """Single-text classification with the labels of the user's training file.

    Args:
        name: str, the registry name ("text_classification").
        **long_text: `keras_bert.tasks.long_text.LongTextOptions` fields.
    """

    main_metric = "accuracy"
    predict_splits = {"test": PREDICTIONS_FILE}
    label_outputs = {"label": "logits"}

    def __init__(self, name="text_classification", **long_text):
        self.name = name
        self.options = LongTextOptions(**long_text)
        self.labels = None  # Sorted training labels, known once the training file is read.
        self.pair = None  # Pairs or single texts, known once the training file is read.

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
        if split != self.train_split and self.labels is None and data_dir:
            train_path = os.path.join(data_dir, "train.tsv")
            if tf.io.gfile.exists(train_path):
                self._learn(read_tsv(train_path))
        examples = read_tsv(
            path, split, require_labels=split not in self.predict_splits, pair=self.pair
        )
        if split == self.train_split:
            self._learn(examples)
        if self.labels is not None and split != self.train_split:
            for e in examples:
                if e.label is not None and e.label not in self.labels:
                    raise TextClassificationDataError(
                        f"{path}:{e.guid.rpartition('-')[2]}: label {e.label!r} is not in the "
                        f"training file's labels ({', '.join(self.labels)})."
                    )
        return examples

    def _learn(self, train_examples):
        """The label set and kind (pairs or not) of the training examples."""
        self.labels = sorted({e.label for e in train_examples})
        self.pair = train_examples[0].text_b is not None

    def check_settings(self, seq_length):
        if self.options.long_text == "windows":  # Pairs are checked when the data is read.
            resolve_stride(seq_length, False, self.options.doc_stride)

    def encode(self, examples, tokenizer, seq_length, training=False):
        pair = bool(examples) and examples[0].text_b is not None
        inputs, example_index = feature_lib.encode_long_texts(
            tokenizer,
            seq_length,
            [e.text for e in examples],
            [e.text_b for e in examples] if pair else None,
            self.options,
            self.name,
        )
        labels = {}
        if self.labels is not None and examples and all(e.label is not None for e in examples):
            index = {label: i for i, label in enumerate(self.labels)}
            labels["label"] = np.array([index[e.label] for e in examples], np.int32)[example_index]
        return feature_lib.FeatureSet(inputs, labels, example_index)

    def build_model(self, encoder, dropout):
        if not self.labels:
            raise ValueError(
                f"Task {self.name} takes its labels from the training file: read the train split "
                f"first (data_dir with train.tsv, or train_file)."
            )
        if document_level(self):
            return DocumentClassifier(
                encoder,
                len(self.labels),
                dropout,
                self.options.window_pooling,
                token_pooling=self.options.token_pooling,
            )
        return BertClassifier(
            encoder, len(self.labels), dropout, pooling=self.options.token_pooling
        )

    def predictions(self, examples, features, outputs):
        """Label strings of the examples from the model outputs (windows' logits pooled per
        example)."""
        logits = feature_lib.pool_windows(
            outputs["logits"], features.example_index, len(examples), self.options.window_pooling
        )
        return [self.labels[i] for i in np.argmax(logits, axis=-1)]

    def evaluate(self, examples, features, outputs):
        gold, predicted = [e.label for e in examples], self.predictions(examples, features, outputs)
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
            for e, label in zip(examples, self.predictions(examples, features, outputs))
        ]
        path = os.path.join(output_dir, self.predict_splits[split])
        write_atomic(path, "\n".join(lines) + "\n")
        return [path]

    def serving_row(self, example):
        return (example.text,) + (() if example.text_b is None else (example.text_b,))

    def info(self):
        return {
            "problem": "classification",
            "labels": list(self.labels or []),
            "text_inputs": ["text", "text_b"] if self.pair else ["text"],
            **dataclasses.asdict(self.options),
        }
