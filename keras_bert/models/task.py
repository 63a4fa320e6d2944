"""`BertTask`: the base of the task models, keras-hub's `Task` for BERT.

A task model takes token ids in `call` (the encoder inputs) and, with its `preprocessor`
attached (`from_preset` attaches one), raw text in `fit`, `predict` and `evaluate`:

>>> model = BertClassifier.from_preset("bert_tiny_uncased", num_classes=2)  # doctest: +SKIP
>>> model.fit(["great!", "awful."], [1, 0], epochs=2)  # the paper's recipe  # doctest: +SKIP
>>> model.predict(["a fine film"])       # logits [B, C]          # doctest: +SKIP

Texts are: a list or NumPy array of strings; a pair as a tuple of two of them or a dict
{"text_a": ..., "text_b": ...}; for `BertMultipleChoice` a tuple (contexts [B], endings [B, K]);
or a batched `tf.data.Dataset` of such texts (with labels for `fit` and `evaluate`). Labels: class
ids [B] (a score for regression); `BertTokenClassifier` one tag id per packed token [B, S] (-1:
no tag); `BertSpanLabeler` a pair (start positions [B], end positions [B]) in the packed sequence.
Tokenization runs in tf.data (tensorflow-text, `keras_bert.text.task_data`), outside the model.

A task model needs no `compile()`: `fit` and `evaluate` compile it with the paper's fine-tuning
recipe (§4, A.3) when it is not compiled yet, as `compile()` without arguments does: the
original's AdamWeightDecay (Adam with decoupled weight decay 0.01, not on LayerNorm and biases),
peak learning rate 2e-5 (`compile(learning_rate=...)`) reached after 10% of the steps then
decayed linearly to 0 at the end of the first `fit` (whose steps set the schedule's length),
gradients clipped to norm 1, the task's loss and metrics. Any argument of `compile` replaces its
default.

The task's loss is each model's `loss_sums` (`keras_bert.models.losses`): the mean over the
labelled examples (tokens for `BertTokenClassifier`, the mean of the start and end losses for
`BertSpanLabeler`) of all replicas. The fine-tuning runner (`keras_bert.tasks`) compiles and
fits these same models, so a run and a Python `fit` train with the same loss and metrics.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import keras
import numpy as np

from keras_bert.models import losses
from keras_bert.models.encoder import BertEncoder
from keras_bert.text import task_data
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.training.optimizers import WarmupLinearDecay, create_optimizer

AUTO = "auto"
PEAK_LEARNING_RATE = 2e-5  # The paper searched 5e-5, 3e-5, 2e-5.
WARMUP_FRACTION = 0.1


class BertTask(keras.Model):
    """A task model: a functional model over the encoder inputs, plus an optional
    `preprocessor` (`BertPreprocessor`) for raw text and the `task_facts` its exports need.

    Each task model class says what it is: `problem` (task.json's: "classification",
    "token_classification", "span", "multiple_choice") and `text_inputs` (the texts its exports
    take), and, as keras-hub's tasks, the classes `from_preset` builds: `backbone_cls` (the
    encoder) and `preprocessor_cls`.

    Args (besides each task model's own):
        preprocessor: `BertPreprocessor` or None.
        task_facts: dict or None: `problem`, `labels`, `text_inputs`, ... (task.json's keys);
            None: `default_facts()`.
    """

    backbone_cls: ClassVar[type] = BertEncoder
    preprocessor_cls: ClassVar[type] = BertPreprocessor
    problem: ClassVar[str | None] = None
    text_inputs: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *args: Any,
        preprocessor: BertPreprocessor | dict[str, Any] | None = None,
        task_facts: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        attached: BertPreprocessor | None = (
            keras.saving.deserialize_keras_object(preprocessor)
            if isinstance(preprocessor, dict)
            else preprocessor
        )
        self.preprocessor = attached
        self.task_facts = dict(task_facts) if task_facts else None

    # === Construction ===

    @classmethod
    def from_preset(cls, preset: Any, **kwargs: Any) -> Self:
        """The task model of a preset, its preprocessor attached (`keras_bert.presets`).

        On `BertTask` itself: the fine-tuned model of a preset, of the class it was fine-tuned
        as.

        Args:
            preset: a name of `keras_bert.presets.PRESETS`, `hf://<org>/<name>`, a directory
                (Google, Hugging Face, pre-training run, fine-tuned `model/`) or a `.keras` file.
            **kwargs: the class's arguments (num_classes=...), `seq_length` (the preprocessor's),
                `labels` and `text_pair` (see `default_facts`).

        Returns:
            the model.
        """
        from keras_bert.checkpoints import from_preset

        return from_preset.load_task(cls, preset, **kwargs)

    def default_facts(self, labels: Any = None, text_pair: bool | None = None) -> dict[str, Any]:
        """The task facts of a new head: problem, labels ("0".."C-1" unless given), inputs.

        Args:
            labels: list, one per class, or None.
            text_pair: bool or None. A classifier reads sentence pairs (text, text_b); recorded
                as the fact `text_pair` when given. None: one text, not recorded (`fit` on
                texts records what it was given).

        Raises:
            ValueError: labels of another count than the classes; text_pair=True for a token
                classifier, or False for a model that always reads two texts.
        """
        _check_text_pair(type(self).__name__, self.problem, self.text_inputs, text_pair)
        facts: dict[str, Any] = {"problem": self.problem, "text_inputs": list(self.text_inputs)}
        units = getattr(self, "num_classes", None)
        if self.problem == "classification":
            if units == 1:
                facts["problem"], labels = "regression", None
            if text_pair is not None:
                facts.update(_text_pair_facts(text_pair))
        if units is not None and facts["problem"] != "regression":
            labels = [str(x) for x in (labels or range(units))]
            if len(labels) != units:
                raise ValueError(f"{len(labels)} labels for {units} classes: {labels}.")
            facts["labels"] = labels
        return facts

    def task_info(self) -> dict[str, Any]:
        """task.json's dict for this model: its facts, seq_length and casing.

        Raises:
            ValueError: no preprocessor (the export needs its vocabulary).
        """
        if self.preprocessor is None:
            raise ValueError(
                f"This {type(self).__name__} has no preprocessor: build it with from_preset, or "
                "set model.preprocessor = BertPreprocessor(...), before exporting it."
            )
        facts = dict(self.task_facts or self.default_facts())
        seq_length = int(self.preprocessor.seq_length or 128)
        return {
            "task": facts.get("task"),
            **facts,
            "seq_length": seq_length,
            "lower_case": bool(self.preprocessor.tokenizer.lower_case),
            "model_class": type(self).__name__,
        }

    # === Training and inference on raw text ===

    def compile(
        self,
        optimizer: Any = AUTO,
        loss: Any = AUTO,
        *,
        metrics: Any = AUTO,
        learning_rate: float | None = None,
        **kwargs: Any,
    ) -> None:
        """Keras' compile with the paper's defaults (see the module docstring).

        Args:
            optimizer, loss, metrics: Keras' (default "auto": the paper's recipe; its schedule's
                length is set by the next `fit`).
            learning_rate: float or None. The default optimizer's peak learning rate (2e-5; the
                paper searched 5e-5, 3e-5, 2e-5).
            **kwargs: Keras' compile arguments (by name: keyword-only past `loss`).
        """
        if optimizer == AUTO:
            optimizer = create_optimizer(
                learning_rate or PEAK_LEARNING_RATE,
                None,  # `fit` sets the length.
                None,
                variables=self.trainable_variables,
                optimizer="adam_weight_decay",
            )
        # The task's own loss (`compute_loss`) unless another is given: Keras gets none.
        self._task_loss = _is_auto(loss)
        super().compile(
            optimizer=optimizer,
            loss=None if self._task_loss else loss,
            metrics=self._default_metrics() if _is_auto(metrics) else metrics,
            **kwargs,
        )

    def compute_loss(
        self,
        x: Any = None,
        y: Any = None,
        y_pred: Any = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> Any:
        """Keras' `compute_loss`: `task_loss` when compiled with the task's own loss."""
        if not getattr(self, "_task_loss", False):
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        return self.task_loss(y, y_pred, sample_weight)

    def task_loss(self, y: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        """The task's training loss: `loss_sums`' mean over the labelled examples of all
        replicas (`losses.mean_over_replicas`), plus the model's own losses (regularizers).

        Args:
            y: labels: a dict output name -> labels, or what `fit` takes for raw text (class
                ids, a pair of span positions).
            y_pred: the model's outputs (dict).
            sample_weight: per-example weights [B] or None.
        """
        loss = losses.mean_over_replicas(*self.loss_sums(self._targets(y), y_pred, sample_weight))
        for extra in self.losses:
            loss = loss + keras.ops.cast(extra, loss.dtype)
        return loss

    def loss_sums(self, y: Any, y_pred: Any, sample_weight: Any = None) -> tuple[Any, Any]:
        """(sum of the per-example losses, their count): softmax cross-entropy of `logits`
        (labels < 0 left out). Each task model defines its own.

        Args:
            y: dict output name -> labels. y_pred: dict of outputs. sample_weight: [B] or None.
        """
        return losses.sparse_xent_sums(y["logits"], y_pred["logits"], sample_weight)

    def fit(
        self, x: Any = None, y: Any = None, batch_size: int | None = None, **kwargs: Any
    ) -> keras.callbacks.History:
        """Keras' fit; raw text (see the module docstring) goes through the preprocessor. Not
        compiled yet: compiled with the paper's recipe, sized to this fit."""
        if not self.compiled:
            self.compile()
        if task_data.is_text(x):
            self._record_text_pair(x)
            shuffle = kwargs.pop("shuffle", True)
            x = self._dataset(x, y, batch_size, shuffle=shuffle, labelled=True)
            kwargs["shuffle"] = False  # Shuffled in the dataset, each epoch.
            y = batch_size = None
            if kwargs.get("validation_data") is not None:
                texts, labels = task_data.split_xy(kwargs["validation_data"])
                kwargs["validation_data"] = self._dataset(texts, labels, None, labelled=True)
        # Keras keeps the schedule as `_learning_rate`; one without a length takes this fit's.
        schedule = getattr(self.optimizer, "_learning_rate", None)
        if isinstance(schedule, WarmupLinearDecay) and schedule.num_train_steps is None:
            steps = task_data.train_steps(x, y, batch_size, kwargs)
            schedule.set_length(steps, int(WARMUP_FRACTION * steps))
        return super().fit(x, y, batch_size=batch_size, **kwargs)

    def predict(self, x: Any, batch_size: int | None = None, **kwargs: Any) -> Any:
        """Keras' predict. For raw text: the logits (NumPy [B, C], [B, S, C] or [B, K]), or for
        `BertSpanLabeler` the dict of start and end logits."""
        if not task_data.is_text(x):
            return super().predict(x, batch_size=batch_size, **kwargs)
        outputs = super().predict(self._dataset(x, None, batch_size, labelled=False), **kwargs)
        return outputs["logits"] if list(outputs) == ["logits"] else outputs

    def evaluate(
        self, x: Any = None, y: Any = None, batch_size: int | None = None, **kwargs: Any
    ) -> Any:
        """Keras' evaluate; raw text goes through the preprocessor. Not compiled yet: compiled
        with the paper's recipe (its loss and metrics)."""
        if not self.compiled:
            self.compile()
        if task_data.is_text(x):
            x = self._dataset(x, y, batch_size, labelled=True)
            y = batch_size = None
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def _dataset(
        self,
        x: Any,
        y: Any = None,
        batch_size: int | None = None,
        shuffle: bool = False,
        labelled: bool | None = None,
    ) -> Any:
        """A batched tf.data of raw text `x` (and labels `y`) as encoder inputs (and labels per
        output), `task_data.dataset` with this model's parts.

        Raises:
            ValueError: no preprocessor, or texts and labels of different lengths.
        """
        if self.preprocessor is None:
            raise ValueError(
                f"This {type(self).__name__} has no preprocessor for raw text: build it with "
                "from_preset or set model.preprocessor; or pass encoder inputs (token ids)."
            )
        return task_data.dataset(
            self._packer(),
            x,
            None if y is None else self._label_arrays(y),
            batch_size,
            shuffle=shuffle,
            labelled=labelled,
            targets=self._targets,
        )

    # Each task model's parts of the raw-text path: how texts are packed, what its labels are
    # (NumPy), which outputs they go to, and its metrics (its loss: `loss_sums`). These defaults:
    # one label per example on the output "logits", accuracy.

    def _packer(self) -> Any:
        return task_data.packer(self.preprocessor)

    def _label_arrays(self, y: Any) -> Any:
        return np.asarray(y, np.int32)

    def _targets(self, y: Any) -> Any:
        return y if isinstance(y, dict) else {"logits": y}

    def _default_metrics(self) -> Any:
        return {"logits": [keras.metrics.SparseCategoricalAccuracy("accuracy")]}

    def _record_text_pair(self, x: Any) -> None:
        """A classifier `fit` on pairs (a tuple of two text lists, a dict with text_b, a tf.data
        of them) records text_pair=True in its facts, on single texts False: its exports take
        what it was trained on."""
        if self.problem != "classification":
            return
        facts = dict(self.task_facts or self.default_facts())
        self.task_facts = {**facts, **_text_pair_facts(task_data.is_pair(x))}

    # === Config ===

    def get_config(self) -> dict[str, Any]:
        config = {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
            **self._head_args(),
        }
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        if self.task_facts:
            config["task_facts"] = _jsonable(self.task_facts)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Self:
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)

    def _head_args(self) -> dict[str, Any]:
        return {}


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == AUTO


def _check_text_pair(
    name: str, problem: str | None, inputs: tuple[str, ...], text_pair: bool | None
) -> None:
    if text_pair is None or problem == "classification":
        return
    if text_pair and len(inputs) == 1:
        raise ValueError(f"A {name} reads one text ({inputs[0]}): text_pair=True does not apply.")
    if not text_pair and len(inputs) > 1:
        raise ValueError(
            f"A {name} always reads {' and '.join(inputs)}: text_pair=False does not apply."
        )


def _text_pair_facts(text_pair: bool) -> dict[str, Any]:
    inputs = ["text", "text_b"] if text_pair else ["text"]
    return {"text_pair": bool(text_pair), "text_inputs": inputs}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value
