"""Serving signatures: one small builder per kind of task.

Text tasks export three signatures (the names TF Serving requests use):
- `serving_default`: raw strings in (`text`, and `text_b` for pairs), the task's answer out,
  named for people (`label`, `label_id`, `probabilities`; `score`; `pooled_output`, ...).
- `preprocess`: the same strings -> encoder inputs `input_word_ids`, `input_mask`,
  `input_type_ids` (int32 [B, S]), as the model was trained with.
- `predict_ids`: encoder inputs -> the model's raw outputs (`logits`, ...), float32.

A builder takes an `ExportSource` and returns {signature name: tf.function with an input
signature}. Kinds whose examples are one text (or pair) per row only say how the model's
outputs become the answer and call `text_signatures`. Kinds with other inputs (SQuAD's
question and context windows, NER's word offsets, SWAG's choices) write their own builder
from the same pieces (`text_inputs.TextPacker`, `text_inputs.trim_to_longest`,
`model_outputs`) and register it in `BUILDERS` under the `problem` their task writes to
task.json.

Dimensions: B batch, S sequence, H hidden, C classes.
"""

import tensorflow as tf

from keras_bert.export.text_inputs import TextPacker, encoder_input_specs, text_specs


def model_outputs(source, inputs):
    """The task model's (or the encoder's) tensor outputs in inference mode, as float32."""
    model = source.model if source.model is not None else source.encoder
    outputs = model(inputs, training=False)
    return {name: tf.cast(value, tf.float32) for name, value in outputs.items() if tf.is_tensor(value)}


def text_signatures(source, answer):
    """serving_default, preprocess and predict_ids of a one-text-per-row task.

    Args:
        source: `ExportSource`.
        answer: callable (encoder inputs, model outputs) -> dict of named answer tensors.

    Returns:
        dict signature name -> tf.function.
    """
    packer = TextPacker(source.tokenizer, source.seq_length)
    texts_spec = text_specs(source.text_inputs)

    @tf.function(input_signature=[encoder_input_specs()])
    def predict_ids(inputs):
        return model_outputs(source, inputs)

    @tf.function(input_signature=texts_spec)
    def preprocess(*texts):
        return packer(*texts)

    @tf.function(input_signature=texts_spec)
    def serving_default(*texts):
        inputs = preprocess(*texts)  # (B, S): padded to the batch's longest row only.
        return answer(inputs, predict_ids(inputs))

    return {"serving_default": serving_default, "preprocess": preprocess, "predict_ids": predict_ids}


def classification(source):
    """`label` (string [B]), `label_id` (int32 [B]) and `probabilities` (float32 [B, C])."""
    labels = tf.constant([str(label) for label in source.info["labels"]])

    def answer(inputs, outputs):
        probabilities = tf.nn.softmax(outputs["logits"], axis=-1)  # (B, C)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)  # (B,)
        return {"label": tf.gather(labels, label_id), "label_id": label_id, "probabilities": probabilities}

    return text_signatures(source, answer)


def regression(source):
    """`score` (float32 [B]), e.g. STS-B similarity."""
    return text_signatures(source, lambda inputs, outputs: {"score": outputs["logits"][:, 0]})


def encoder(source):
    """`pooled_output` [B, H], `sequence_output` [B, S, H] and its `input_mask` [B, S]."""
    return text_signatures(source, lambda inputs, outputs: {
        "pooled_output": outputs["pooled_output"], "sequence_output": outputs["sequence_output"],
        "input_mask": inputs["input_mask"]})


# task.json `problem` (or "encoder") -> builder.
BUILDERS = {"classification": classification, "regression": regression, "encoder": encoder}


def build_signatures(source):
    """The signatures of `source` by its kind.

    Raises:
        ValueError: no builder for the kind (naming the known ones).
    """
    if source.kind not in BUILDERS:
        raise ValueError(f"No serving signatures for {source.kind!r} models ({source.path}); "
                         f"kinds: {', '.join(BUILDERS)}.")
    return BUILDERS[source.kind](source)
