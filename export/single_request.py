"""The single-request graph of int8 SavedModels: a batch of one runs small-tensor ops.

Served as requests come, most batches hold one text: a few dozen token rows. There the oneDNN
ops that make int8 batches fast cost more than their work: `_MklLayerNorm` and `_MklQuantizeV2`
take 50-300 microseconds each on a [25, 384] tensor (a new primitive per call, and on two threads
a hand-off between them), against 15-60 for TensorFlow's plain ops (measured 2026-11-28, 2 shared
cores; bench/bench_serving_int8.py). So an int8 `serving_default` holds two encoder graphs on
the same weights, chosen in the graph by the batch's size (`by_batch_size`):

- batch 1: each LayerNorm in TensorFlow's plain ops, each input quantized by a plain
  round-and-clip (the same grid and saturation as `QuantizeV2`), the products still oneDNN's
  `_QuantizedMatMul`; its width padded to a multiple of `WIDTH_STEP` positions (padding is
  masked out of attention, and oneDNN reuses its products' primitives across a few widths
  instead of one per text length);
- larger batches: the graph of `predict_ids` (`keras_bert.export.int8_saved_model`).

Both compute the same int8 products on the same ranges: the answers differ by float rounding
(a LayerNorm's sum in another order can move a value across a rounding step of the next
product's input). float32 exports have one graph: their LayerNorm is TensorFlow's plain ops
already, and padding their widths measured no faster.

Which graph a trace builds is set by `small_ops()` while the model is called; the layers of
`keras_bert.export.int8_saved_model` ask `in_small_ops()`.

Dimensions: B batch, S sequence, K a product's input width.
"""

import contextlib

import tensorflow as tf

# Batch-1 widths are padded to a multiple of this (at most the export's seq_length).
WIDTH_STEP = 8
_STATE = {"small": False}


@contextlib.contextmanager
def small_ops():
    """Layers called (traced) in this block build the single-request graph."""
    before = _STATE["small"]
    _STATE["small"] = True
    try:
        yield
    finally:
        _STATE["small"] = before


def in_small_ops():
    """Whether the layers being traced build the single-request graph (`small_ops`)."""
    return _STATE["small"]


def quantize_grid(values, low, width):
    """float32 [M, K] -> quint8 round((values - low) 255 / width), clipped to [0, 255]: the grid
    of `QuantizeV2` ("MIN_FIRST" from `low`; "SCALED" with low 0) in plain ops."""
    steps = tf.round((values - low) * (255.0 / width))
    return tf.bitcast(tf.cast(tf.clip_by_value(steps, 0.0, 255.0), tf.uint8), tf.quint8)


def layer_norm(x, gamma, beta, epsilon):
    """LayerNorm over the last axis of float32 x [..., H] in plain TensorFlow ops."""
    mean = tf.reduce_mean(x, -1, keepdims=True)
    centered = x - mean
    variance = tf.reduce_mean(tf.square(centered), -1, keepdims=True)
    return centered * (tf.math.rsqrt(variance + epsilon) * gamma) + beta


def by_batch_size(source, inputs, predict_ids, model_outputs):
    """The model's outputs on encoder inputs [B, S]: for int8 exports (task.json
    `quantization`), the single-request graph when B is 1 and `predict_ids` otherwise; for
    float32 exports, `predict_ids`.

    Args:
        source: `ExportSource`.
        inputs: dict of int32 [B, S] encoder inputs.
        predict_ids: the tf.function of the batch graph (inputs -> outputs).
        model_outputs: function (source, inputs) -> dict of float32 outputs, traced here for
            the single-request graph.

    Returns:
        dict of float32 outputs, [B, ...] (sequence outputs [B, S, ...]).
    """
    if "quantization" not in source.info:
        return predict_ids(inputs)

    def one_request():
        width = tf.shape(inputs["input_mask"])[1]
        padded = tf.maximum(
            tf.minimum(-(-width // WIDTH_STEP) * WIDTH_STEP, source.seq_length), width
        )
        wide = {k: tf.pad(v, [[0, 0], [0, padded - width]]) for k, v in inputs.items()}
        with small_ops():
            outputs = model_outputs(source, wide)
        # Sequence outputs back to the batch's width.
        return {k: v[:, :width] if v.shape.rank >= 3 else v for k, v in outputs.items()}

    return tf.cond(
        tf.equal(tf.shape(inputs["input_mask"])[0], 1), one_request, lambda: predict_ids(inputs)
    )
