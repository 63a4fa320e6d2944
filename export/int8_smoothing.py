"""SmoothQuant (Xiao et al. 2022) for the int8 SavedModels' inputs quantized per tensor
(`keras_bert.export.int8_saved_model`): each input channel of a Dense layer divided by a factor,
the kernel's row multiplied by it, so that the product is unchanged in float and a few outlier
channels no longer set the one range of the whole input. The factors come from the inputs'
channel maxima on calibration texts (`InputRecorder`, `calibration`): the task's recorded
training texts, answered by the float copy's own serving signature.
"""

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from keras_bert.export import signatures, warmup

# The migration strength (SmoothQuant's alpha): how much of the inputs' range moves into the
# kernel. MRPC (all-MiniLM-L6-v2): 0.5 and 0.7 are level, 0.3 loses more labels.
SMOOTHING_ALPHA = 0.5
CALIBRATION_BATCH = 16  # Rows of calibration texts per call.


class _RecordingDense(keras.layers.Dense):
    """A float Dense that records its input's channel maxima (eager calls) in `_recorder`."""

    def call(self, inputs, training=None):
        self._recorder.see(self, inputs)
        return super().call(inputs, training=training)


class InputRecorder:
    """The channel ranges of the inputs of Dense layers over eager calls, and which layers
    read the same input (the attention's query, key and value).

    Attributes:
        maxima: dict layer path -> float32 [K], each input channel's abs-max.
        lows, highs: dict layer path -> float32 [K], each input channel's min and max.
        groups: dict layer path -> the path of the first layer that read the same input.
    """

    def __init__(self):
        self.lows, self.highs, self.groups, self._last = {}, {}, {}, (None, None)

    @property
    def maxima(self):
        return {path: np.maximum(-low, self.highs[path]) for path, low in self.lows.items()}

    def see(self, layer, inputs):
        rows = np.reshape(np.asarray(inputs), (-1, inputs.shape[-1]))  # (M, K)
        low, high = rows.min(0), rows.max(0)  # (K,)
        if layer.path in self.lows:
            low = np.minimum(low, self.lows[layer.path])
            high = np.maximum(high, self.highs[layer.path])
        self.lows[layer.path], self.highs[layer.path] = low, high
        last_inputs, last_path = self._last
        if last_inputs is inputs:
            self.groups[layer.path] = self.groups[last_path]
        else:
            self.groups.setdefault(layer.path, layer.path)
            self._last = (inputs, layer.path)

    def record(self, layers, run):
        """Runs `run()` (calls of the model that holds `layers`, tf.functions run eagerly)
        with each Dense of `layers` recording its inputs; returns self."""
        for layer in layers:
            layer._recorder = self
            layer.__class__ = _RecordingDense
        eager = tf.config.functions_run_eagerly()
        tf.config.run_functions_eagerly(True)
        try:
            run()
        finally:
            tf.config.run_functions_eagerly(eager)
            for layer in layers:
                layer.__class__ = keras.layers.Dense
                del layer._recorder
        return self


def smooth(layers, recorder, alpha=SMOOTHING_ALPHA):
    """SmoothQuant (Xiao et al. 2022) on float Dense layers: each input channel k divided by
    d_k = max|x_k|^alpha / max|w_k|^(1 - alpha) (x over `recorder`'s inputs, w the kernel rows
    of every layer that reads the same input), the kernel's row k multiplied by it.

    Returns:
        dict layer path -> float32 [K] constant 1 / d (one object per shared input), the
        factor of the inputs.
    """
    groups = {}
    for layer in layers:
        groups.setdefault(recorder.groups[layer.path], []).append(layer)
    factors, maxima = {}, recorder.maxima
    for members in groups.values():
        kernels = [keras.ops.convert_to_numpy(layer.kernel) for layer in members]  # (K, N)
        weight_max = np.max([np.abs(k).max(1) for k in kernels], axis=0)  # (K,)
        input_max = maxima[members[0].path]  # (K,)
        d = np.maximum(input_max, 1e-5) ** alpha / np.maximum(weight_max, 1e-5) ** (1 - alpha)
        inverse = tf.constant(1.0 / d, tf.float32)
        for layer, kernel in zip(members, kernels):
            layer.kernel.assign(kernel * d[:, None])
            factors[layer.path] = inverse
    return factors


def fold_into_value(blocks, factors, can_fold=lambda layer: True):
    """Moves the smoothing of each Transformer block's attention output into its value layer:
    the attention's context is the attention-weighted sum of the value's outputs, so the
    value's output channels (kernel columns, bias) times the factor make the context come
    smoothed, with no pass over it. Float Dense layers; `factors` as `smooth` returns them.

    Returns:
        set of the paths whose input comes smoothed (their factor no longer to apply).
    """
    folded = set()
    for block in blocks:
        factor = factors.get(block.attention_output.path)
        if factor is not None and can_fold(block.value):
            factor = np.asarray(factor)
            value = block.value
            value.kernel.assign(keras.ops.convert_to_numpy(value.kernel) * factor)
            if value.bias is not None:
                value.bias.assign(keras.ops.convert_to_numpy(value.bias) * factor)
            folded.add(block.attention_output.path)
    return folded


def calibration(source, texts):
    """A `calibrate` function for `int8_copy`: the copy's serving_default (built as `source`'s)
    answers `texts` (rows of texts) in batches of CALIBRATION_BATCH."""

    def calibrate(copy):
        task = source.model is not None
        copied = dataclasses.replace(
            source,
            model=copy if task else None,
            encoder=copy.encoder if task else copy,
            pretrainer=None,
        )
        function = signatures.build_signatures(copied)["serving_default"]
        columns = warmup.text_columns(function)
        rows = warmup.read_rows(texts, sum(columns.values()))
        rows = sorted(rows, key=lambda row: sum(map(len, row)))  # Batches of similar lengths.
        for i in range(0, len(rows), CALIBRATION_BATCH):
            request = warmup.as_request(rows[i : i + CALIBRATION_BATCH], columns)
            function(*(tf.constant(request[name]) for name in columns))  # Signature order.

    return calibrate
