"""int8 SavedModels for TF Serving on CPUs (`export_saved_model(..., quantize="int8")`).

The export quantizes a copy of the task model with Keras' own `model.quantize("int8")`: each
quantized `Dense` holds its kernel in int8 with a scale per output channel (abs-max), and
quantizes its input per row at run time (abs-max). What Keras' int8 `Dense` runs on TensorFlow
is an int8 x int8 -> int32 `BatchMatMulV3`, which TensorFlow's CPU kernels compute in plain
Eigen code: 5x slower than the float32 `MatMul` (all-MiniLM-L6-v2, 32 rows x 48 tokens, one
thread: 81 against 17 ms per row). So the export goes below Keras' call, not its weights: each
quantized `Dense` of the copy computes its product with `QuantizedMatMulWithBiasAndDequantize`,
the oneDNN u8 x s8 -> s32 kernel that TensorFlow's x86 releases register for the CPU (oneDNN is
built into them; the kernel is there with TF_ENABLE_ONEDNN_OPTS=0 too; VNNI where the CPU has
it): 1.9x the float32 `MatMul` for the 1,536 x 384 x 1,536 product above. Its scales are
scalars and its activations unsigned, so (`quantize_rows`, `int8_product`):

- the input x [M, K] is divided by its rows' abs-max s [M, 1] and shifted by +1 into [0, 2],
  quantized to uint8 by `QuantizeV2` ("SCALED": x' = round(127.5 (x / s + 1))), the same grid
  as Keras' per-row int8 (step 1/127.5);
- the kernel is Keras' int8 kernel q [K, N] read as qint8 with range [-1, 1] (q / 127); the
  shift's product, the column sums of q / 127, is subtracted through the op's float bias;
- the op's float output [M, N] times s and times the channels' abs-max (127 / kernel_scale)
  is x W, plus the layer's bias, then its activation.

The attention's query, key and value quantize their common input once (`RowCache`). The ops are
all TensorFlow's own: the SavedModel loads where TensorFlow alone is importable (the tests serve
it so); TensorFlow builds without oneDNN (non-x86) lack the kernel. A TF Serving binary was not
at hand to check: TF Serving's x86 builds compile TensorFlow's kernels the same way. The
attention's two batched products (scores, context), the embeddings, LayerNorm, softmax and GELU
stay float, as in Keras' int8 and TFLite's "int8" recipe; so do the Dense layers that
`FLOAT_LAYERS` names (see its comment).
"""

import dataclasses
import re

import keras
import numpy as np
import tensorflow as tf

# The Dense layers (by layer name, a regex) that keep float32 weights: the pooler and the task
# heads (one row per example, or a few outputs per token: no time to gain). On all-MiniLM-L6-v2
# fine-tuned on MRPC (408 dev pairs) every other Dense in int8 keeps 99.26% of the float labels
# (100% of the 378 decided), with the pooler in int8 too the same; the 8-bit products lost no
# decided answer, so no encoder layer is kept float (SQuAD and NER were not measured).
FLOAT_LAYERS = r"^(pooler_dense|classifier|span_logits)$"
# format="saved_model"'s quantize values -> what they do (--help).
QUANTIZATIONS = {
    "none": "float32",
    "int8": "int8 weights per channel and int8 activations per row (at run time) in the "
    "encoder's matrix multiplies (oneDNN), the rest float32",
}
DESCRIPTION = (
    "int8 weights (per output channel) and int8 activations (per row, at run time) in the "
    "encoder's Dense layers (oneDNN QuantizedMatMulWithBiasAndDequantize); the attention's "
    "batched products, embeddings, LayerNorm, softmax, GELU, pooler and task head float32"
)


def check_quantize(quantize):
    """Raises ValueError unless `quantize` is one of `QUANTIZATIONS`."""
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            f"format='saved_model' takes quantize {' or '.join(map(repr, QUANTIZATIONS))}, got "
            f"{quantize!r} (the other quantizations are TFLite's, format='tflite')."
        )


class Int8Dense(keras.layers.Dense):
    """A Keras int8 `Dense` (after `quantize("int8")`) whose product runs in oneDNN's u8 x s8
    kernel (`int8_product`); the same weights, used in inference only. Layers of one copy share
    a `RowCache`: the attention's query, key and value quantize their common input once."""

    def _int8_call(self, inputs, training=None):
        del training
        rows = self._row_cache.quantized(inputs)
        outputs = int8_product(rows, self._kernel, self.kernel_scale, self._column_sums)
        outputs = tf.reshape(
            outputs, tf.concat([tf.shape(inputs)[:-1], tf.shape(outputs)[-1:]], 0)
        )  # (..., N)
        if self.bias is not None:
            outputs = outputs + self.bias
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


class RowCache:
    """The last input quantized by `quantize_rows`, and its rows: a Dense called on the same
    tensor object (the same values) reuses them."""

    def __init__(self):
        self.key, self.rows = None, None

    def quantized(self, inputs):
        if self.key is None or self.key != inputs.ref():
            self.key, self.rows = inputs.ref(), quantize_rows(inputs)
        return self.rows


def quantize_rows(inputs):
    """float32 [..., K] -> (uint8 rows [M, K] on the grid round(127.5 (x / s + 1)) as quint8,
    their scales s [M, 1]: each row's abs-max)."""
    rows = tf.reshape(inputs, [-1, tf.shape(inputs)[-1]])  # (M, K)
    scale = tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True) + 1e-12  # (M, 1)
    shifted = tf.raw_ops.QuantizeV2(
        input=rows / scale + 1.0, min_range=0.0, max_range=2.0, T=tf.quint8, mode="SCALED"
    )
    return shifted.output, scale


def int8_product(rows, kernel, kernel_scale, column_sums):
    """x W for a Keras int8 kernel, in oneDNN's u8 x s8 -> s32 product (module docstring).

    Args:
        rows: `quantize_rows`' (quint8 [M, K], float32 [M, 1]).
        kernel: int8 [K, N], Keras' quantized kernel (q = round(w * kernel_scale)).
        kernel_scale: float32 [N], 127 / the channel's abs-max.
        column_sums: float32 [N], -sum over K of kernel / 127 (the shift's product).

    Returns:
        float32 [M, N].
    """
    quantized, scale = rows
    zero, two, one = tf.constant(0.0), tf.constant(2.0), tf.constant(1.0)
    product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=quantized,
        b=tf.bitcast(kernel, tf.qint8),
        bias=column_sums,
        min_a=zero,
        max_a=two,
        min_b=-one,
        max_b=one,
        min_freezed_output=zero,
        max_freezed_output=zero,
        Toutput=tf.float32,
        input_quant_mode="SCALED",
    )  # (M, N)
    return product * (scale * (127.0 / kernel_scale))


def int8_copy(model: keras.Model, float_layers: str = FLOAT_LAYERS) -> keras.Model:
    """A copy of `model` (its own weights) with `quantize("int8")` applied to every Dense
    layer but those matching `float_layers`, its int8 Dense layers computing in oneDNN
    (`Int8Dense`).

    Args:
        model: a built Keras model (a task model or an encoder); left unchanged.
        float_layers: str, a regex of Dense layer names kept in float.

    Returns:
        keras.Model, for inference.
    """
    copy = model.__class__.from_config(model.get_config())
    copy.set_weights(model.get_weights())

    def int8_layer(layer):
        return isinstance(layer, keras.layers.Dense) and not re.match(float_layers, layer.name)

    copy.quantize("int8", filters=int8_layer)
    cache = RowCache()
    for layer in copy._flatten_layers():
        if isinstance(layer, keras.layers.Dense) and layer.quantization_mode == "int8":
            kernel = keras.ops.convert_to_numpy(layer._kernel).astype(np.float32)
            layer._column_sums = tf.constant(-kernel.sum(0) / 127.0)
            layer._row_cache = cache
            layer.__class__ = Int8Dense
    return copy


def int8_source(source):
    """The `ExportSource` of `source`'s int8 copy; task.json's `quantization` says what is
    quantized."""
    model = int8_copy(source.model if source.model is not None else source.encoder)
    encoder = model.encoder if source.model is not None else model
    int8_layers = sorted(
        layer.name
        for layer in model._flatten_layers()
        if isinstance(layer, Int8Dense) and layer.quantization_mode == "int8"
    )
    info = dict(
        source.info,
        quantization={
            "mode": "int8",
            "description": DESCRIPTION,
            "int8_dense_layers": len(int8_layers),
            "float_dense_layers": sorted(
                layer.name
                for layer in model._flatten_layers()
                if isinstance(layer, keras.layers.Dense) and not isinstance(layer, Int8Dense)
            ),
        },
    )
    return dataclasses.replace(
        source,
        model=model if source.model is not None else None,
        encoder=encoder,
        pretrainer=None,
        info=info,
    )
