"""GLUE's nine tasks on the runner: sentence and sentence-pair classification, STS-B regression.

The data and submission files are `keras_bert.tasks.glue.data`'s (tensorflow-datasets:
`keras_bert.tasks.glue.tfds_data`), the metrics `keras_bert.tasks.glue.metrics`'; this module is
the model side: features from `features.encode_texts`, a `BertClassifier` on `pooled_output`,
cross-entropy (or mean-squared error for STS-B). Long texts are truncated, or read in windows
whose logits are pooled per example (`keras_bert.tasks.long_text`; options `long_text`,
`doc_stride`, `max_windows`, `window_pooling`).
"""

import dataclasses

import numpy as np

from keras_bert.models.documents import DocumentClassifier
from keras_bert.models.task_models import BertClassifier
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.definition import TaskDefinition
from keras_bert.tasks.glue import data as glue
from keras_bert.tasks.glue.metrics import compute_metrics
from keras_bert.tasks.glue.tfds_data import read_tfds
from keras_bert.tasks.long_text import LongTextOptions, document_level
from keras_bert.text.window_sizes import resolve_stride


class GlueClassification(TaskDefinition):
    """One GLUE task (`keras_bert.tasks.glue.data.SPECS[name]`) for the fine-tuning runner.

    Args:
        name: str, the GLUE task.
        **long_text: `keras_bert.tasks.long_text.LongTextOptions` fields.
    """

    label_outputs = {"label": "logits"}

    def __init__(self, name, **long_text):
        self.options = LongTextOptions(**long_text)
        self.spec = glue.get_spec(name)
        self.name = self.spec.name
        self.main_metric = self.spec.main_metric
        self.eval_splits = dict(self.spec.eval_splits)
        self.predict_splits = dict(self.spec.predict_splits)

    @property
    def regression(self):
        return self.spec.is_regression

    def read(self, data_dir, split, use_tfds=False, file=None):
        if file:
            raise ValueError(
                f"GLUE task {self.name} reads its files from data_dir (the task's folder of the "
                f"GLUE distribution); train_file/eval_file are for SQuAD, CoNLL-2003 and SWAG."
            )
        if use_tfds:
            return read_tfds(self.spec, split, data_dir=data_dir)
        if not data_dir:
            raise ValueError(f"Task {self.name} needs data_dir (the GLUE task folder) or tfds.")
        return glue.read_examples(self.spec, data_dir, split)

    @property
    def pair(self):
        return self.spec.text_columns[1] is not None

    def check_settings(self, seq_length):
        if self.options.long_text == "windows":
            resolve_stride(seq_length, self.pair, self.options.doc_stride)

    def read_unlabeled(self, path):
        """Inputs in the layout of the task's test file (index and text columns)."""
        return glue.read_examples(self.spec, None, next(iter(self.predict_splits)), file=path)

    def encode(self, examples, tokenizer, seq_length, training=False):
        pair = any(e.text_b is not None for e in examples)
        inputs, example_index = feature_lib.encode_long_texts(
            tokenizer,
            seq_length,
            [e.text_a for e in examples],
            [e.text_b or "" for e in examples] if pair else None,
            self.options,
            self.name,
        )
        labels = {}
        if examples and all(e.label is not None for e in examples):
            if self.regression:
                labels["label"] = np.array([float(e.label) for e in examples], np.float32)
            else:
                index = {label: i for i, label in enumerate(self.spec.labels)}
                labels["label"] = np.array([index[e.label] for e in examples], np.int32)
        labels = {k: v[example_index] for k, v in labels.items()}  # Windows: their example's.
        return feature_lib.FeatureSet(inputs, labels, example_index)

    def build_model(self, encoder, dropout):
        classes = 1 if self.regression else len(self.spec.labels)
        if document_level(self):
            return DocumentClassifier(
                encoder,
                classes,
                dropout,
                self.options.window_pooling,
                token_pooling=self.options.token_pooling,
            )
        return BertClassifier(encoder, classes, dropout, pooling=self.options.token_pooling)

    def predictions(self, examples, features, outputs):
        """Label strings (or STS-B scores) of the examples from the model outputs (windows'
        logits pooled per example)."""
        logits = feature_lib.pool_windows(
            outputs["logits"], features.example_index, len(examples), self.options.window_pooling
        )
        if self.regression:
            return [float(v) for v in logits[:, 0]]
        return [self.spec.labels[i] for i in np.argmax(logits, axis=-1)]

    def evaluate(self, examples, features, outputs):
        return compute_metrics(
            self.spec, [e.label for e in examples], self.predictions(examples, features, outputs)
        )

    def write_predictions(self, split, examples, features, outputs, output_dir):
        return [
            glue.write_submission(
                self.spec,
                split,
                examples,
                self.predictions(examples, features, outputs),
                output_dir,
            )
        ]

    def serving_row(self, example):
        return (example.text_a,) + (() if example.text_b is None else (example.text_b,))

    def info(self):
        return {
            "problem": "regression" if self.regression else "classification",
            "labels": None if self.regression else list(self.spec.labels),
            "text_inputs": ["text", "text_b"] if self.pair else ["text"],
            **dataclasses.asdict(self.options),
        }
