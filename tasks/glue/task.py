"""GLUE's nine tasks on the runner: sentence and sentence-pair classification, STS-B regression.

The data, metrics and submission files are `keras_bert.tasks.glue.data`'s; this module is the
model side: features from `features.encode_texts`, a `BertClassifier` on `pooled_output`,
cross-entropy (or mean-squared error for STS-B).
"""

import numpy as np
import tensorflow as tf

from keras_bert.models.task_models import BertClassifier
from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.glue import data as glue
from keras_bert.tasks.task import Task, sparse_xent_sums


class GlueClassification(Task):
    """One GLUE task (`keras_bert.tasks.glue.data.SPECS[name]`) for the fine-tuning runner."""

    label_keys = ("label",)

    def __init__(self, name):
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
            return glue.read_tfds(self.spec, split, data_dir=data_dir)
        if not data_dir:
            raise ValueError(f"Task {self.name} needs data_dir (the GLUE task folder) or tfds.")
        return glue.read_examples(self.spec, data_dir, split)

    def read_unlabeled(self, path):
        """Inputs in the layout of the task's test file (index and text columns)."""
        return glue.read_examples(self.spec, None, next(iter(self.predict_splits)), file=path)

    def encode(self, examples, tokenizer, seq_length, training=False):
        pair = any(e.text_b is not None for e in examples)
        inputs = feature_lib.encode_texts(
            tokenizer,
            seq_length,
            [e.text_a for e in examples],
            [e.text_b or "" for e in examples] if pair else None,
        )
        labels = {}
        if examples and all(e.label is not None for e in examples):
            if self.regression:
                labels["label"] = np.array([float(e.label) for e in examples], np.float32)
            else:
                index = {label: i for i, label in enumerate(self.spec.labels)}
                labels["label"] = np.array([index[e.label] for e in examples], np.int32)
        return feature_lib.FeatureSet(inputs, labels)

    def build_model(self, encoder, dropout):
        return BertClassifier(
            encoder, num_classes=1 if self.regression else len(self.spec.labels), dropout=dropout
        )

    def loss_sums(self, labels, outputs):
        logits = outputs["logits"]
        if self.regression:
            error = tf.reshape(logits, [-1]) - tf.cast(labels["label"], tf.float32)
            return tf.reduce_sum(tf.square(error)), tf.cast(tf.size(error), tf.float32)
        return sparse_xent_sums(labels["label"], logits)

    def predictions(self, outputs):
        """Label strings (or STS-B scores) from the model outputs."""
        logits = outputs["logits"]
        if self.regression:
            return [float(v) for v in logits[:, 0]]
        return [self.spec.labels[i] for i in np.argmax(logits, axis=-1)]

    def evaluate(self, examples, features, outputs):
        return glue.compute_metrics(
            self.spec, [e.label for e in examples], self.predictions(outputs)
        )

    def write_predictions(self, split, examples, features, outputs, output_dir):
        return [
            glue.write_submission(self.spec, split, examples, self.predictions(outputs), output_dir)
        ]

    def info(self):
        return {
            "problem": "regression" if self.regression else "classification",
            "labels": None if self.regression else list(self.spec.labels),
            "text_inputs": ["text"] if self.name in ("cola", "sst2") else ["text", "text_b"],
        }
