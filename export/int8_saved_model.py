"""int8 SavedModels for TF Serving on CPUs (`export_saved_model(..., quantize="int8")`).

The export quantizes a copy of the task model with Keras' own `model.quantize("int8")`: each
quantized `Dense` holds its kernel in int8 with a scale per output channel (abs-max). What
Keras' int8 `Dense` runs on TensorFlow is an int8 x int8 -> int32 `BatchMatMulV3` in plain Eigen
code, 5x slower than float32's `MatMul`. So the export goes below Keras' call, not its weights:
each int8 `Dense` of the copy (`Int8Dense`) computes its product in `_QuantizedMatMul`, the
oneDNN u8 x s8 kernel with fused post-ops that TensorFlow's x86 builds register for the CPU
(oneDNN is built into them; VNNI where the CPU has it; AMX on the CPUs that have it). One op
takes the uint8 input, the int8 kernel with its scale per output channel, a float bias and an
activation, and returns float32: the kernel reordered for the CPU once (`is_weight_const`),
the bias and GELU applied in the product's registers. Its input range is one scalar pair;
inputs are quantized in one of two ways (`QUANTIZERS`, chosen per layer by `INPUT_MODES`):

- per tensor (`quantize_tensor`): one range, x - low quantized to uint8 by `QuantizeV2`
  ("MIN_FIRST", 255 steps). Calibrated, the range is a constant: the smoothed input's min and
  max over the calibration texts (values beyond saturate); uncalibrated, the batch's min and max.
  The shift's product (low times the kernel's column sums) joins the bias, and the bias and
  activation run inside the product: no pass over the output.
- per row (`quantize_rows`): each row's range, (x - low) / (max - low) quantized, low the row's
  min ("row"), or for the feed-forward output's input a constant ("floor"): the fused
  activation's floor (`ACTIVATION_FLOORS`, GELU's -0.17 times the input's largest smoothing
  factor), so the shift's product is a constant too; the product times each row's width plus
  the bias, then the activation (where not fused).

Inputs are smoothed first (SmoothQuant, Xiao et al. 2022, `keras_bert.export.int8_smoothing`):
each input channel divided by a factor calibrated on the task's recorded training texts, the
kernel's row multiplied by it, so that a few outlier channels do not set the range for all.
The attention output's factor moves into the value's output channels (`fold_into_value`): the
context comes smoothed. Classification, regression and multiple choice quantize per tensor but
the feed-forward output's input (GELU's output, whose outlier tokens one range cannot hold;
Bondarenko et al. 2021); SQuAD and NER, whose spans and entities move with smaller changes of
the logits, per row. Measured on all-MiniLM-L6-v2 (bench/bench_serving_int8.py,
bench/bench_serving_int8_tasks.py): SST-2 keeps 99.5% of the float labels (MRPC, earlier: one
range per tensor everywhere, unsmoothed, 97.8%; smoothed 99.3%); SQuAD, its feed-forward outputs
float (`KIND_FLOAT_LAYERS`), 97.6% of the answers and CoNLL-2003 98.1% of the entity lists
(their per-tensor recipe: 92.6% and 96.1%). Without calibration texts (an
encoder, or a `model/` that recorded none) every input is quantized per row, unsmoothed. The
attention's query, key and value quantize their common input once (`InputCache`).

Each op costs time of its own at serving sizes (tens of microseconds, and on two threads the
small ones do not split): so the constant ranges (no reductions for them), and each
LayerNormalization in one oneDNN op (`FusedLayerNorm`, `_MklLayerNorm`) instead of about nine.
On SST-2 at batch 32 on two threads these took the model from 0.92-0.98x to 1.03-1.21x ONNX
Runtime's int8 (bench/bench_serving_int8.py; four runs on a shared host).

The ops are TensorFlow's own (`_QuantizedMatMul` and `_MklLayerNorm` are internal op names:
TensorFlow registers them, tf.raw_ops lists them not): the SavedModel loads where TensorFlow
alone is importable (the tests serve it so); builds without oneDNN (non-x86) lack the
kernels. A TF Serving binary was not at hand to check: its x86 builds compile TensorFlow's
kernels the same way. Per row,
`QuantizeV2` runs in "SCALED" mode into uint8, where oneDNN's kernel (TF_ENABLE_ONEDNN_OPTS=1)
and Eigen's round alike; per tensor in "MIN_FIRST" mode, where oneDNN rounds x - min to the
nearest step and Eigen (TF_ENABLE_ONEDNN_OPTS=0) x and min apart (up to one step off). The
attention's two batched products, the embeddings, LayerNorm and softmax stay float,
as in Keras' int8 and TFLite's "int8" recipe; so do the Dense layers that `FLOAT_LAYERS` names.
"""

import dataclasses
import re

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_library

from keras_bert.checkpoints import task_model
from keras_bert.export import int8_smoothing, single_request
from keras_bert.layers import utils
from keras_bert.layers.transformer import TransformerBlock

# The Dense layers (by path, a regex: "pooler_dense", "layer_5/output_dense") that keep float32
# weights: the pooler and the task heads (one row per example, or a few outputs per token: no
# time to gain). On MRPC the pooler in int8 too changed no label.
FLOAT_LAYERS = r"^(pooler_dense|classifier|span_logits)$"
# SQuAD also keeps the feed-forward outputs float: its answers kept is the int8 bar most at risk
# (4,874 real SQuAD v1.1 questions, all-MiniLM-L6-v2: 96.6% with every Dense in int8, and
# equivalent rewrites of the graph moved it by 0.5 points: int8 rounding makes small changes
# grow through the layers; float feed-forward outputs cut the logits' error by a quarter and
# kept 97.6%).
KIND_FLOAT_LAYERS = {"span": r"^(pooler_dense|span_logits|.*/output_dense)$"}
# How each int8 Dense layer's input is quantized (`QUANTIZERS`): the first (regex of its path,
# mode) that matches (module docstring), by task kind. Classification, regression and multiple
# choice: per tensor but the feed-forward output's input, per row from the activation's floor
# ("floor"; per row where no fused activation feeds it); SQuAD and NER, whose answers (spans,
# entities) move with smaller changes of the logits: per row, from each row's min (the floor
# measured no better on SQuAD: 96.88% of the answers with every Dense in int8, against 96.57-97.05%
# for the row's min).
INPUT_MODES = ((r".*/output_dense$", "floor"), (r".*", "tensor"))
KIND_INPUT_MODES = {"span": ((r".*", "row"),), "token_classification": ((r".*", "row"),)}
# `hidden_act` -> the oneDNN post-op that computes it inside the intermediate product.
FUSED_ACTIVATIONS = {
    "gelu": "GeluExact",
    **dict.fromkeys(("gelu_new", "gelu_tanh", "gelu_pytorch_tanh"), "GeluApproximate"),
    "relu": "Relu",
    "tanh": "Tanh",
}
# Below each post-op's outputs (GELU's minimum is -0.16997): per row, the feed-forward
# output's input is quantized from it.
ACTIVATION_FLOORS = {"GeluExact": -0.17, "GeluApproximate": -0.1701, "Relu": 0.0, "Tanh": -1.0}
# The post-ops' float functions (where the input is quantized per row, applied after).
ACTIVATIONS = {
    "GeluExact": utils.gelu,
    "GeluApproximate": utils.gelu_tanh,
    "Relu": keras.activations.relu,
    "Tanh": keras.ops.tanh,
}
# format="saved_model"'s quantize values -> what they do (--help).
QUANTIZATIONS = {
    "none": "float32",
    "int8": "int8 weights per channel and int8 activations (calibrated ranges per tensor, or "
    "per row at run time) in the encoder's matrix multiplies (oneDNN), the rest float32",
}
DESCRIPTION = (
    "int8 weights (per output channel) and int8 activations (per tensor after smoothing, on "
    "ranges calibrated on the training texts; or per row, at run time) in the encoder's Dense "
    "layers (oneDNN _QuantizedMatMul, GELU fused); the attention's batched products, "
    "embeddings, LayerNorm (oneDNN, one op), softmax, pooler and task head float32"
)


def check_quantize(quantize):
    """Raises ValueError unless `quantize` is one of `QUANTIZATIONS`."""
    if quantize not in QUANTIZATIONS:
        raise ValueError(
            f"format='saved_model' takes quantize {' or '.join(map(repr, QUANTIZATIONS))}, got "
            f"{quantize!r} (the other quantizations are TFLite's, format='tflite')."
        )


class Int8Dense(keras.layers.Dense):
    """A Keras int8 `Dense` (after `quantize("int8")`) whose product runs in oneDNN's
    `_QuantizedMatMul` (`quantized_matmul`); the same weights, used in inference only.

    `_input_mode` says how its input is quantized ("tensor": `quantize_tensor`, "row" and
    "floor": `quantize_rows`), `_input_range` its constant range (per tensor: (low, width)) or
    floor (per row), or None; `_fused_activation` the oneDNN post-op that replaces the block's
    activation (or None). Layers of one copy share an `InputCache`: the attention's query, key
    and value quantize their common input once."""

    def _int8_call(self, inputs, training=None):
        del training
        quantized, width, shift, scale = self._input_cache.quantized(
            inputs, self._input_mode, self._smoothing, self._input_range
        )
        kernel = (self._kernel, self._kernel_range, self._negative_range)
        # The shift's product and the bias: (N,), or per row (M, N); a constant where the
        # shift is one (a calibrated range, a floor).
        bias = shift * self._column_sums + self._bias_values
        if scale is None:  # One range: the bias and activation run inside the product.
            outputs = quantized_matmul(quantized, width, kernel, bias, self._fused_activation)
        else:
            zeros = np.zeros_like(self._column_sums)
            outputs = quantized_matmul(quantized, width, kernel, zeros) * scale + bias
            if self._fused_activation is not None:
                outputs = ACTIVATIONS[self._fused_activation](outputs)
        if inputs.shape.rank != 2:
            outputs = tf.reshape(
                outputs, tf.concat([tf.shape(inputs)[:-1], tf.shape(outputs)[-1:]], 0)
            )  # (..., N)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


class InputCache:
    """The last input quantized (by `quantize_tensor` or `quantize_rows`, after its smoothing):
    a Dense called on the same tensor object (the same values), in the same mode and with the
    same smoothing, reuses it."""

    def __init__(self):
        self.key, self.value = None, None

    def quantized(self, inputs, mode, smoothing=None, input_range=None):
        key = (inputs.ref(), mode, id(smoothing), input_range)
        if self.key != key:
            smoothed = inputs if smoothing is None else inputs * smoothing  # (..., K)
            self.key, self.value = key, QUANTIZERS[mode](smoothed, input_range)
        return self.value


def _uint8(values, width):
    """float32 [M, K] in [0, width] -> quint8 [M, K], round(255 values / width)."""
    if single_request.in_small_ops():
        return single_request.quantize_grid(values, 0.0, width)
    return tf.raw_ops.QuantizeV2(
        input=values,
        min_range=0.0,
        max_range=width,
        T=tf.quint8,
        mode="SCALED",
        round_mode="HALF_TO_EVEN",
        ensure_minimum_range=0.0,
    ).output


def _rows(inputs):
    """[..., K] -> [M, K] (the Transformer blocks' Dense inputs are rows already)."""
    return inputs if inputs.shape.rank == 2 else tf.reshape(inputs, [-1, tf.shape(inputs)[-1]])


def quantize_tensor(inputs, input_range=None):
    """One range for the whole batch: float32 [..., K] -> (quint8 q [M, K], width, shift,
    None), x = q width / 255 + shift on 255 steps from the tensor's min (shift) to its max;
    or from `input_range`'s (low, width), constant floats (calibrated): values outside it
    saturate.

    `QuantizeV2`'s "MIN_FIRST" mode subtracts the min itself (oneDNN: round((x - min) 255 /
    width), the grid of x - min in "SCALED" mode, one pass over x fewer); it widens a range that
    does not hold 0 to hold it, so the range is widened here first (the encoder's inputs,
    LayerNorm's and the attention's outputs, hold both signs)."""
    rows = _rows(inputs)  # (M, K)
    if input_range is not None:
        low, width = input_range
    else:
        low = tf.minimum(tf.reduce_min(rows), 0.0)
        width = tf.maximum(tf.maximum(tf.reduce_max(rows), 0.0) - low, 1e-6)
    if single_request.in_small_ops():
        return single_request.quantize_grid(rows, low, width), width, low, None
    quantized = tf.raw_ops.QuantizeV2(
        input=rows,
        min_range=low,
        max_range=low + width,
        T=tf.quint8,
        mode="MIN_FIRST",
        ensure_minimum_range=0.0,
    ).output
    return quantized, width, low, None


def quantize_rows(inputs, floor=None):
    """A range per row: float32 [..., K] -> (quint8 q [M, K], 1, shift [M, 1], scale s [M, 1]),
    x = s q / 255 + shift on 255 steps from the row's min (shift) to its max; or from `floor`
    (a constant float below every value: an activation's minimum) to the row's max, shift =
    floor."""
    rows = _rows(inputs)  # (M, K)
    low = tf.reduce_min(rows, axis=-1, keepdims=True) if floor is None else floor  # (M, 1)
    shifted = rows - low  # (M, K), >= 0
    scale = tf.reduce_max(shifted, axis=-1, keepdims=True) + 1e-12  # (M, 1)
    return _uint8(shifted * tf.math.reciprocal(scale), 1.0), 1.0, low, scale


# Input modes -> their quantizers: float32 [..., K] -> (quint8 q [M, K], width, shift, scale):
# x = scale q width / 255 + shift (scale None: 1).
QUANTIZERS = {"tensor": quantize_tensor, "row": quantize_rows, "floor": quantize_rows}


def quantized_matmul(quantized, width, kernel, bias, activation=None):
    """x W + bias (then `activation`) in oneDNN's u8 x s8 `_QuantizedMatMul` (module docstring).

    Args:
        quantized: quint8 [M, K], x on the grid x = q * width / 255.
        width: float32 scalar, the input's range (0 to width).
        kernel: (int8 [K, N] Keras' kernel q, float32 [N] each channel's abs-max r, float32 [N]
            -r): W = q r / 127.
        bias: float32 [N], added to the product.
        activation: None, or a post-op name of `FUSED_ACTIVATIONS`' values ("GeluExact").

    Returns:
        float32 [M, N].
    """
    if not tf.inside_function():  # The op has no eager wrapper: run it in a graph.
        return tf.function(quantized_matmul)(quantized, width, kernel, bias, activation)
    weights, weight_range, negative_range = kernel
    fused = ["BiasAdd", *([activation] if activation else []), "Dequantize"]
    inputs = [quantized, tf.bitcast(weights, tf.qint8), bias, 0.0, width]
    inputs = [tf.convert_to_tensor(x, tf.float32) if i > 1 else x for i, x in enumerate(inputs)]
    # An op without a Python wrapper (tf.raw_ops lists none whose name starts with "_").
    _, _, op, _ = op_def_library._apply_op_helper(
        "_QuantizedMatMul",
        name="QuantizedMatMul",
        device_inputs=[*inputs, negative_range, weight_range],
        host_inputs=[],
        Tdevice_outputs=[tf.float32],
        Thost_outputs=[],
        T1=tf.quint8,
        T2=tf.qint8,
        Tbias=tf.float32,
        U=tf.float32,
        Tout=tf.float32,
        transpose_a=False,
        transpose_b=False,
        is_weight_const=True,  # Reordered for the CPU once, on the first call.
        is_bias_const=False,
        fused_ops=fused,
        input_quant_mode="SCALED",
        output_quant_mode="SCALED",
        leakyrelu_alpha=0.2,
    )
    return op.outputs[0]  # (M, N)


def int8_copy(
    model: keras.Model,
    float_layers: str = FLOAT_LAYERS,
    input_modes=INPUT_MODES,
    calibrate=None,
    smooth_layers: str = ".*",
) -> keras.Model:
    """A copy of `model` (its own weights) with `quantize("int8")` applied to every Dense
    layer but those matching `float_layers`, its int8 Dense layers computing in oneDNN
    (`Int8Dense`): inputs quantized as `input_modes` say (per tensor on the ranges `calibrate`
    saw; the feed-forward output's rows from the activation's floor), smoothed
    (`int8_smoothing.smooth`; the attention output's in the value) where they match
    `smooth_layers` and `calibrate` is given; each Transformer block's activation fused into
    its intermediate product; LayerNormalization in one op (`FusedLayerNorm`).

    Args:
        model: a built Keras model (a task model or an encoder); left unchanged.
        float_layers: str, a regex of Dense layer paths ("layer_0/query") kept in float.
        input_modes: ((regex of Dense layer paths, `QUANTIZERS` mode), ...): the first match
            sets a layer's mode; without `calibrate` "tensor" becomes "row".
        calibrate: None, or a function of the float copy that calls it on calibration data
            (tf.functions run eagerly): the inputs' channel maxima for the smoothing.
        smooth_layers: str, a regex of the Dense layer paths whose inputs are smoothed.

    Returns:
        keras.Model, for inference.
    """
    copy = model.__class__.from_config(model.get_config())
    copy.set_weights(model.get_weights())

    def int8_layer(layer):
        return isinstance(layer, keras.layers.Dense) and not re.match(float_layers, layer.path)

    factors, recorder = {}, None
    if calibrate is not None:
        recorded = [layer for layer in copy._flatten_layers() if int8_layer(layer)]
        recorder = int8_smoothing.InputRecorder().record(recorded, lambda: calibrate(copy))
        smoothed = [layer for layer in recorded if re.match(smooth_layers, layer.path)]
        factors = int8_smoothing.smooth(smoothed, recorder)
    blocks = [b for b in copy._flatten_layers() if isinstance(b, TransformerBlock)]
    folded = int8_smoothing.fold_into_value(blocks, factors, int8_layer)
    copy.quantize("int8", filters=int8_layer)
    cache = InputCache()
    for layer in copy._flatten_layers():
        if isinstance(layer, keras.layers.Dense) and layer.quantization_mode == "int8":
            _to_int8_dense(layer, cache, factors.get(layer.path), layer.path in folded)
            mode = next((m for r, m in input_modes if re.match(r, layer.path)), "tensor")
            layer._input_mode = "row" if mode == "tensor" and calibrate is None else mode
            if layer._input_mode == "tensor":  # A constant range: the calibrated one.
                layer._input_range = _calibrated_range(recorder, layer.path, factors)
        elif isinstance(layer, keras.layers.LayerNormalization):
            _fuse_layer_norm(layer)
    for block in blocks:
        fused = FUSED_ACTIVATIONS.get(str(getattr(block, "hidden_act", "")))
        if fused and isinstance(block.intermediate, Int8Dense):
            block.intermediate._fused_activation = fused
            block.activation = _identity
            output = block.output_dense
            if isinstance(output, Int8Dense) and output._input_mode == "floor":
                # Its input is the activation's output: rows from the activation's floor.
                factor = 1.0 if output._smoothing is None else np.asarray(output._smoothing)
                output._input_range = float(np.min(ACTIVATION_FLOORS[fused] * factor))
    for layer in copy._flatten_layers():  # "floor" where no fused activation feeds: per row.
        if isinstance(layer, Int8Dense) and layer._input_mode == "floor":
            if layer._input_range is None:
                layer._input_mode = "row"
    return copy


def _to_int8_dense(layer, cache, factor, folded=False):
    """Turns a Keras int8 Dense into an `Int8Dense` (its input's smoothing: `factor`, None;
    `folded`: applied by the layer before)."""
    kernel = keras.ops.convert_to_numpy(layer._kernel).astype(np.float32)  # (K, N)
    channel_max = 127.0 / keras.ops.convert_to_numpy(layer.kernel_scale).reshape(-1)
    layer._kernel_range = tf.constant(channel_max, tf.float32)  # (N,)
    layer._negative_range = tf.constant(-channel_max, tf.float32)
    layer._column_sums = (kernel.sum(0) * channel_max / 127.0).astype(np.float32)  # (N,)
    layer._bias_values = (
        keras.ops.convert_to_numpy(layer.bias) if layer.bias is not None else 0.0
    ).astype(np.float32)
    layer._input_cache = cache
    layer._smoothing = None if folded else factor
    layer._smoothed = factor is not None
    layer._input_range = None
    layer._fused_activation = None
    layer.__class__ = Int8Dense


def _calibrated_range(recorder, path, factors):
    """(low, width) of a layer's smoothed input over the calibration texts, holding 0."""
    factor = factors.get(path)
    factor = 1.0 if factor is None else np.asarray(factor)
    low = min(float(np.min(recorder.lows[path] * factor)), 0.0)
    high = max(float(np.max(recorder.highs[path] * factor)), 0.0)
    return low, max(high - low, 1e-6)


class FusedLayerNorm(keras.layers.LayerNormalization):
    """LayerNormalization in one oneDNN op (`_MklLayerNorm`) instead of about nine (in the
    single-request graph, `keras_bert.export.single_request`, the nine: faster on few rows)."""

    def call(self, inputs):
        if single_request.in_small_ops():
            return single_request.layer_norm(inputs, self.gamma, self.beta, self.epsilon)
        return layer_norm(inputs, self.gamma, self.beta, self.epsilon)


def layer_norm(x, gamma, beta, epsilon):
    """LayerNorm over the last axis of float32 x [..., H] in oneDNN's `_MklLayerNorm`."""
    if not tf.inside_function():  # The op has no eager wrapper: run it in a graph.
        return tf.function(layer_norm)(x, gamma, beta, epsilon)
    _, _, op, _ = op_def_library._apply_op_helper(
        "_MklLayerNorm", name="LayerNorm", x=x, scale=gamma, offset=beta, epsilon=epsilon
    )
    return op.outputs[0]


def _fuse_layer_norm(layer):
    axis = layer.axis if isinstance(layer.axis, int) else tuple(layer.axis)
    plain = layer.center and layer.scale and not layer.rms_scaling
    if axis in (-1, (-1,)) and plain and layer.compute_dtype == "float32":
        layer.__class__ = FusedLayerNorm


def _identity(x):
    return x


def int8_source(source, float_layers=None, input_modes=None, texts=None, smooth_layers=".*"):
    """The `ExportSource` of `source`'s int8 copy (`int8_copy`), calibrated on `texts` (rows of
    texts; default: the training texts recorded in a fine-tuned `model/`; none recorded: every
    input quantized per row), its Dense layers matching `float_layers` (default: the task
    kind's `KIND_FLOAT_LAYERS`, else `FLOAT_LAYERS`) kept float; task.json's `quantization`
    says what is quantized and how."""
    if texts is None and source.model is not None:
        texts = task_model.read_training_texts(source.path, source.info)
    model = int8_copy(
        source.model if source.model is not None else source.encoder,
        float_layers or KIND_FLOAT_LAYERS.get(source.kind, FLOAT_LAYERS),
        input_modes or KIND_INPUT_MODES.get(source.kind, INPUT_MODES),
        int8_smoothing.calibration(source, texts) if texts else None,
        smooth_layers,
    )
    dense = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dense)]
    int8 = [layer for layer in dense if isinstance(layer, Int8Dense)]
    info = dict(
        source.info,
        quantization={
            "mode": "int8",
            "description": DESCRIPTION,
            "int8_dense_layers": len(int8),
            "float_dense_layers": sorted(layer.path for layer in dense if layer not in int8),
            "inputs": {
                mode: sorted(layer.path for layer in int8 if layer._input_mode == mode)
                for mode in QUANTIZERS
            },
            "smoothed_inputs": sorted(layer.path for layer in int8 if layer._smoothed),
            "smoothing_in_value": sorted(
                layer.path for layer in int8 if layer._smoothed and layer._smoothing is None
            ),
            "calibrated_ranges": {
                layer.path: [round(v, 6) for v in layer._input_range]
                for layer in sorted(int8, key=lambda layer: layer.path)
                if layer._input_mode == "tensor" and layer._input_range is not None
            },
            "row_floors": {
                layer.path: round(layer._input_range, 6)
                for layer in sorted(int8, key=lambda layer: layer.path)
                if layer._input_mode == "floor"
            },
            "fused_layer_norms": sum(
                isinstance(x, FusedLayerNorm) for x in model._flatten_layers()
            ),
            "smoothing_alpha": int8_smoothing.SMOOTHING_ALPHA if texts else None,
            "calibration_texts": len(texts or ()),
            "fused_activations": sorted(
                f"{layer.path}: {layer._fused_activation}"
                for layer in int8
                if layer._fused_activation
            ),
        },
    )
    return dataclasses.replace(
        source,
        model=model if source.model is not None else None,
        encoder=model.encoder if source.model is not None else model,
        pretrainer=None,
        info=info,
    )
