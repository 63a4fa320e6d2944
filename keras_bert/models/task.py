"""`BertTask`: the base of the task models, keras-hub's `Task` for BERT.

A task model takes token ids in `call` (the encoder inputs) and, with its `preprocessor`
attached (`from_preset` attaches one), raw text in `fit`, `predict` and `evaluate`:

>>> model = BertClassifier.from_preset("bert_tiny_uncased", num_classes=2)  # doctest: +SKIP
>>> model.compile()                      # the paper's recipe    # doctest: +SKIP
>>> model.fit(["great!", "awful."], [1, 0], epochs=2)            # doctest: +SKIP
>>> model.predict(["a fine film"])       # logits [B, C]          # doctest: +SKIP

Texts are: a list or NumPy array of strings; a pair as a tuple of two of them or a dict
{"text_a": ..., "text_b": ...}; for `BertMultipleChoice` a tuple (contexts [B], endings [B, K]);
or a batched `tf.data.Dataset` of such texts (with labels for `fit` and `evaluate`). Labels: class
ids [B] (a score for regression); `BertTokenClassifier` one tag id per packed token [B, S] (-1:
no tag); `BertSpanLabeler` a pair (start positions [B], end positions [B]) in the packed sequence.
Tokenization runs in tf.data (tensorflow-text), outside the model.

`compile()` without arguments gives the paper's fine-tuning recipe (§4, A.3) as the original code
ran it: its AdamWeightDecay (Adam with decoupled weight decay 0.01, not on LayerNorm and biases),
peak learning rate 2e-5 (`compile(learning_rate=...)`) reached after 10% of the steps then decayed
linearly to 0 at the end of `fit`, gradients clipped to norm 1, the task's loss and metrics. Any
argument given replaces its default.
"""

from __future__ import annotations

from typing import Any, Self

import keras
import numpy as np

from keras_bert.text.preprocessor import BertPreprocessor

AUTO = "auto"
# Per class: the task's `problem` (as task.json's) and its serving text inputs.
_PROBLEMS = {
    "BertClassifier": ("classification", ["text"]),
    "BertTokenClassifier": ("token_classification", ["words"]),
    "BertSpanLabeler": ("span", ["question", "context"]),
    "BertMultipleChoice": ("multiple_choice", ["sent1", "sent2", "endings"]),
}
# What the export needs beyond the labels, as the fine-tuning tasks record it.
_SPAN_FACTS = dict(
    squad_version="1.1",
    outputs=["start_logits", "end_logits"],
    doc_stride=128,
    max_query_length=64,
    n_best_size=20,
    max_answer_length=30,
    null_score_diff_threshold=0.0,
)


class BertTask(keras.Model):
    """A task model: a functional model over the encoder inputs, plus an optional
    `preprocessor` (`BertPreprocessor`) for raw text and the `task_facts` its exports need.

    Args (besides each task model's own):
        preprocessor: `BertPreprocessor` or None.
        task_facts: dict or None: `problem`, `labels`, `text_inputs`, ... (task.json's keys);
            None: `default_facts()`.
    """

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
        self._auto_optimizer = False

    # === Construction ===

    @classmethod
    def from_preset(cls, preset: Any, **kwargs: Any) -> Self:
        """The task model of a preset, its preprocessor attached (`keras_bert.presets`).

        Args:
            preset: a name of `keras_bert.presets.PRESETS`, `hf://<org>/<name>`, a directory
                (Google, Hugging Face, pre-training run, fine-tuned `model/`) or a `.keras` file.
            **kwargs: the class's arguments (num_classes=...), `seq_length` (the preprocessor's),
                `labels` and `text_pair` (see `default_facts`).

        Returns:
            the model.
        """
        from keras_bert.checkpoints.from_preset import load_task

        return load_task(cls, preset, **kwargs)

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
        problem, inputs = _PROBLEMS[type(self).__name__]
        _check_text_pair(type(self).__name__, inputs, text_pair)
        facts: dict[str, Any] = {"problem": problem, "text_inputs": list(inputs)}
        units = getattr(self, "num_classes", None)
        if problem == "classification":
            if units == 1:
                facts["problem"], labels = "regression", None
            if text_pair is not None:
                facts.update(_text_pair_facts(text_pair))
        if units is not None and facts["problem"] != "regression":
            labels = [str(x) for x in (labels or range(units))]
            if len(labels) != units:
                raise ValueError(f"{len(labels)} labels for {units} classes: {labels}.")
            facts["labels"] = labels
        if problem == "span":
            facts.update(_SPAN_FACTS)
        if problem == "multiple_choice":
            facts.update(num_choices=4, labels=list(range(4)))
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
            optimizer, loss, metrics: Keras' (default "auto": the paper's recipe).
            learning_rate: float or None. The default optimizer's peak learning rate (2e-5; the
                paper searched 5e-5, 3e-5, 2e-5).
            **kwargs: Keras' compile arguments (by name: keyword-only past `loss`).
        """
        from keras_bert.training import task_data

        self._auto_optimizer = optimizer == AUTO
        self._peak_learning_rate = learning_rate or task_data.PEAK_LEARNING_RATE
        if self._auto_optimizer:  # Rebuilt with its schedule once fit knows the steps.
            optimizer = task_data.paper_optimizer(self, 1, self._peak_learning_rate)
        default_loss, default_metrics = task_data.loss_and_metrics(self)
        self._compile_args = dict(
            loss=default_loss if loss == AUTO else loss,
            metrics=default_metrics if metrics == AUTO else metrics,
            **kwargs,
        )
        super().compile(optimizer=optimizer, **self._compile_args)

    def fit(
        self, x: Any = None, y: Any = None, batch_size: int | None = None, **kwargs: Any
    ) -> keras.callbacks.History:
        """Keras' fit; raw text (see the module docstring) goes through the preprocessor."""
        from keras_bert.training import task_data

        if task_data.is_text(x):
            self._record_text_pair(x)
            shuffle = kwargs.pop("shuffle", True)
            x = task_data.dataset(self, x, y, batch_size, shuffle=shuffle, labelled=True)
            kwargs["shuffle"] = False  # Shuffled in the dataset, each epoch.
            y = batch_size = None
            if kwargs.get("validation_data") is not None:
                texts, labels = task_data.split_xy(kwargs["validation_data"])
                kwargs["validation_data"] = task_data.dataset(
                    self, texts, labels, None, labelled=True
                )
        if self._auto_optimizer:
            steps = task_data.train_steps(x, y, batch_size, kwargs)
            optimizer = task_data.paper_optimizer(self, steps, self._peak_learning_rate)
            super().compile(optimizer=optimizer, **self._compile_args)
            self._auto_optimizer = False
        return super().fit(x, y, batch_size=batch_size, **kwargs)

    def predict(self, x: Any, batch_size: int | None = None, **kwargs: Any) -> Any:
        """Keras' predict. For raw text: the logits (NumPy [B, C], [B, S, C] or [B, K]), or for
        `BertSpanLabeler` the dict of start and end logits."""
        from keras_bert.training import task_data

        if not task_data.is_text(x):
            return super().predict(x, batch_size=batch_size, **kwargs)
        texts = task_data.dataset(self, x, None, batch_size, labelled=False)
        outputs = super().predict(texts, **kwargs)
        return outputs["logits"] if list(outputs) == ["logits"] else outputs

    def evaluate(
        self, x: Any = None, y: Any = None, batch_size: int | None = None, **kwargs: Any
    ) -> Any:
        """Keras' evaluate; raw text goes through the preprocessor."""
        from keras_bert.training import task_data

        if task_data.is_text(x):
            x = task_data.dataset(self, x, y, batch_size, labelled=True)
            y = batch_size = None
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def _record_text_pair(self, x: Any) -> None:
        """A classifier `fit` on pairs (a tuple of two text lists, a dict with text_b, a tf.data
        of them) records text_pair=True in its facts, on single texts False: its exports take
        what it was trained on."""
        if _PROBLEMS.get(type(self).__name__, ("",))[0] != "classification":
            return
        facts = dict(self.task_facts or self.default_facts())
        self.task_facts = {**facts, **_text_pair_facts(_is_pair(x))}

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


def _check_text_pair(name: str, inputs: list[str], text_pair: bool | None) -> None:
    if text_pair is None or _PROBLEMS[name][0] == "classification":
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


def _is_pair(x: Any) -> bool:
    """Whether raw text `x` (see the module docstring) is sentence pairs."""
    if hasattr(x, "element_spec"):  # A tf.data of (texts, labels...) or of texts.
        spec = x.element_spec
        x = spec[0] if isinstance(spec, tuple) and len(spec) > 1 else spec
    if isinstance(x, dict):
        return "text_b" in x
    return isinstance(x, tuple) and len(x) == 2


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value
