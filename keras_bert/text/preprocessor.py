"""BertPreprocessor: raw text (or a text pair) -> encoder inputs, as one Keras layer.

Dimensions: B batch, S sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeAlias

import keras
import tensorflow as tf

from keras_bert.inputs import INPUT_NAMES
from keras_bert.text.packer import BertPacker
from keras_bert.text.tokenizer import BertTokenizer

# Dict inputs use the names of the original run_classifier's InputExample.
SEGMENT_KEYS = ("text_a", "text_b")
# One text tensor, one or two of them, or a dict with "text_a" (and "text_b").
TextInputs: TypeAlias = tf.Tensor | Sequence[tf.Tensor] | dict[str, tf.Tensor]


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes one or two texts and packs them as [CLS] A [SEP] (B [SEP]).

    Sits in front of `keras_bert.BertEncoder` in a Keras model (string inputs), in
    tf.data, or in a SavedModel serving signature taking raw strings; it is saved with
    the model (the vocabulary is part of its config).

    Args:
        tokenizer: `keras_bert.text.BertTokenizer`; its [CLS], [SEP] and [PAD] ids are used.
        seq_length: int (truncate and pad to it) or None (pad to the batch's longest).
        truncation: "longest_first" (the original) or "waterfall"; see `BertPacker`.

    Call arguments:
        inputs: a tf.string tensor [B] (or a scalar for one example), a tuple/list of one
            or two such tensors, or a dict with keys "text_a" and optionally "text_b".

    Returns:
        dict of int32 [B, S] tensors `input_word_ids`, `input_mask`, `input_type_ids`.

    Example:
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
    >>> pre = BertPreprocessor(BertTokenizer(vocab), seq_length=6)
    >>> pre((tf.constant(["Hello"]), tf.constant(["world!"])))["input_word_ids"].numpy().tolist()
    [[2, 5, 3, 6, 1, 3]]
    """

    tokenizer_cls: ClassVar[type] = BertTokenizer  # The tokenizer `from_preset` builds.

    def __init__(
        self,
        tokenizer: BertTokenizer | dict[str, Any],
        seq_length: int | None = 128,
        truncation: str = "longest_first",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise TypeError(
                f"tokenizer must be a keras_bert BertTokenizer, got {type(tokenizer).__name__}."
            )
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.truncation = truncation
        self.packer = BertPacker(
            seq_length,
            cls_id=tokenizer.cls_id,
            sep_id=tokenizer.sep_id,
            pad_id=tokenizer.pad_id,
            truncation=truncation,
            name="packer",
        )
        self._convert_input_args = False  # keep tf.string tensors as they are
        self._allow_non_tensor_positional_args = True
        self.built = True

    def call(self, inputs: TextInputs) -> dict[str, tf.Tensor]:
        segments = _segments(inputs)
        for segment in segments:
            if segment.dtype != tf.string:
                raise TypeError(
                    f"BertPreprocessor takes tf.string text, got {segment.dtype.name}; "
                    f"pass token ids to BertPacker instead."
                )
            if segment.shape.rank not in (0, 1):
                raise ValueError(
                    f"Text inputs must be [batch] or scalar strings, got shape {segment.shape}."
                )
        return self.packer([self.tokenizer(segment) for segment in segments])  # (B, S) each

    def compute_output_spec(self, inputs: TextInputs) -> dict[str, keras.KerasTensor]:
        segment = _segments(inputs)[0]
        shape = tuple(segment.shape) + (self.seq_length,)
        return {k: keras.KerasTensor(shape, dtype="int32") for k in INPUT_NAMES}

    @classmethod
    def from_preset(
        cls, preset: Any, seq_length: int | None = None, **kwargs: Any
    ) -> BertPreprocessor:
        """The preprocessor of a preset (`keras_bert.presets`), built as `cls`: its tokenizer
        (`tokenizer_cls`), and `seq_length` (default: a fine-tuned model's training length, else
        128)."""
        from keras_bert.checkpoints import from_preset

        return from_preset.load_preprocessor(cls, preset, seq_length=seq_length, **kwargs)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            tokenizer=keras.saving.serialize_keras_object(self.tokenizer),
            seq_length=self.seq_length,
            truncation=self.truncation,
        )
        return config


def _segments(inputs: TextInputs) -> list[tf.Tensor]:
    """The list of one or two text tensors in `inputs` (tensor, tuple/list or dict)."""
    if isinstance(inputs, dict):
        unknown = set(inputs) - set(SEGMENT_KEYS)
        if unknown or "text_a" not in inputs:
            raise ValueError(
                f"Dict inputs need the key 'text_a' and optionally 'text_b', got {sorted(inputs)}."
            )
        inputs = [inputs[k] for k in SEGMENT_KEYS if k in inputs]
    segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    if not 1 <= len(segments) <= 2:
        raise ValueError(
            f"BertPreprocessor takes one text or a pair of texts, got {len(segments)}."
        )
    return [
        s if isinstance(s, (tf.Tensor, keras.KerasTensor)) else tf.convert_to_tensor(s)
        for s in segments
    ]
