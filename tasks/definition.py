"""`TaskDefinition`, the task interface: data -> features -> model -> metrics -> predictions.

A task definition is a small class (not a Keras model: it builds one, a
`keras_bert.models.task.BertTask`) the runner (`keras_bert.tasks.finetune`) drives; the runner owns
everything shared (tokenizer, batching, strategy, optimizer, checkpoints, logs, outputs). The
runner picks tasks by name from `keras_bert.tasks.registry`.

Dimensions: B batch, N features.
"""

import os

from keras_bert.tasks.documents import WEIGHT


class TaskDefinition:
    """One benchmark's data, head, loss, metrics and prediction files.

    Attributes:
        name: str, the `--task` name.
        main_metric: str, the eval_results key that picks the best epoch (higher is better).
        train_split: str. eval_splits: dict split -> suffix added to its metric names.
        predict_splits: dict split -> prediction file name.
        label_outputs: dict FeatureSet label name -> the task model's output it trains (the
            model's own `loss_sums` is the loss, the same as a Python user's `fit`);
            `label_keys` are its keys.
        recipe: dict of fine-tuning defaults that differ from the GLUE recipe
            (e.g. {"seq_length": 384, "learning_rate": 5e-5}).
    """

    name: str | None = None
    main_metric: str | None = None
    train_split = "train"
    eval_splits: dict[str, str] = {"dev": ""}
    predict_splits: dict[str, str] = {}
    label_outputs: dict[str, str] = {}
    recipe: dict[str, int | float] = {}

    def read(self, data_dir, split, use_tfds=False, file=None):
        """The examples of `split`, from `data_dir` (or `file`), or from tensorflow-datasets."""
        raise NotImplementedError

    def read_unlabeled(self, path):
        """Examples of inputs only, from a file in the format of the task's (first) prediction
        split, for distillation (`unlabeled_file`); their labels, if the file has any, are not
        used."""
        split = next(iter(self.predict_splits), self.train_split)
        return self.read(os.path.dirname(path), split, file=path)

    def encode(self, examples, tokenizer, seq_length, training=False):
        """Examples -> `keras_bert.tasks.features.FeatureSet`."""
        raise NotImplementedError

    def build_model(self, encoder, dropout):
        """The task model on `encoder` (a `keras_bert.models.task_models` class)."""
        raise NotImplementedError

    @property
    def label_keys(self):
        """The FeatureSet labels a training batch carries (`label_outputs`' keys)."""
        return tuple(self.label_outputs)

    def targets(self, labels):
        """A training batch's labels as the task model's `fit` takes them: `(y,)` or, where
        the batch carries per-example weights (`WEIGHT`: 0 for the padding documents of fixed
        shapes), `(y, sample_weight)`; y is a dict output name -> labels (a label that trains
        no output, such as distillation's, keeps its own name)."""
        y = {self.label_outputs.get(k, k): v for k, v in labels.items() if k != WEIGHT}
        return (y,) if WEIGHT not in labels else (y, labels[WEIGHT])

    def evaluate(self, examples, features, outputs):
        """Metrics dict (plain names) from the model `outputs` (see `trainer.predict`)."""
        raise NotImplementedError

    def write_predictions(self, split, examples, features, outputs, output_dir):
        """Writes the split's prediction files into `output_dir`; returns their paths."""
        raise NotImplementedError

    def serving_row(self, example):
        """The example's texts in the order of the exported serving_default's inputs (int8
        TFLite calibrates on a sample of them)."""
        raise NotImplementedError

    def info(self):
        """JSON-able facts export needs beyond the vocabulary (labels, output meaning)."""
        return {}

    def check_vocabulary(self, tokenizer):
        """Raise if the tokenizer lacks something the task needs (default: nothing)."""

    def check_settings(self, seq_length):
        """Raise if the task's options do not fit `seq_length` (default: nothing); the run's
        config calls it before anything is written."""
