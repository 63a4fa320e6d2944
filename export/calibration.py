"""Calibration ranges measured by running the calibrated flatbuffer in LiteRT (`measure`),
combined over the calibration texts (`reduce_ranges`) and written back as its statistics
(`with_ranges`)."""

import collections

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from keras_bert.export.flatbuffer_edit import model_object


def with_statistics(calibrated):
    """(subgraph, tensor) of every tensor with calibration statistics."""
    model = schema.Model.GetRootAsModel(calibrated, 0)
    return [
        (g, t)
        for g in range(model.SubgraphsLength())
        for t in range(model.Subgraphs(g).TensorsLength())
        if model.Subgraphs(g).Tensors(t).Quantization() is not None
        and model.Subgraphs(g).Tensors(t).Quantization().MinLength()
    ]


def measure(flatbuffer, samples, tensors, channels=(), grams=()):
    """Runs `flatbuffer` (float) on `samples` in LiteRT with every tensor kept.

    Returns:
        ({(subgraph, tensor): [(min, max, number of values) of each sample]} of `tensors`,
         {(subgraph, tensor): float array [samples, 2, C], each sample's min and max per channel
         (last axis)} of `channels`,
         {(subgraph, tensor): float64 array [C, C], X^T X over every sample's rows X [rows, C]}
         of `grams`).
    """
    interpreter = _keeping_interpreter(flatbuffer)
    tensors, channels, grams = set(tensors), set(channels), set(grams)
    seen, per_channel, gram = collections.defaultdict(list), collections.defaultdict(list), {}
    for signature, inputs in samples:
        interpreter.get_signature_runner(signature)(**inputs)
        for key in tensors | channels | grams:
            try:
                value = interpreter.get_tensor(key[1], key[0])
            except ValueError:  # Not allocated in this call (a branch not taken).
                continue
            if not value.size:
                continue
            if key in tensors:
                seen[key].append((float(value.min()), float(value.max()), value.size))
            if key in channels:
                rows = value.reshape(-1, value.shape[-1])
                per_channel[key].append(np.stack([rows.min(axis=0), rows.max(axis=0)]))
            if key in grams:
                rows = value.reshape(-1, value.shape[-1]).astype(np.float64)
                gram[key] = gram.get(key, 0.0) + rows.T @ rows
    return (
        dict(seen),
        {key: np.stack(values) for key, values in per_channel.items()},
        gram,
    )


FEW_VALUES = 16  # A tensor with fewer values per sample has its overall range under "mean".


def reduce_ranges(seen, reduce):
    """{tensor: (min, max)} from each sample's (min, max, size) (`measure`): "mean" averages them,
    "minmax" takes the overall min and max.

    "mean" takes the overall range of a tensor with fewer than `FEW_VALUES` values in a typical
    sample: the [CLS] state of one channel group, one value per text, has a min equal to its max
    in each text, and their mean was a grid of zero width (all-MiniLM-L6-v2 on MRPC,
    int8_integer_only: the pooler read a constant for that group).

    Measured by running the calibrated model rather than taken from the converter's own
    calibration run, which gives different ranges from one run to the next on the same texts;
    these are reproducible. "mean" averages as the moving averages of quantization-aware training
    do: rare outliers saturate instead of coarsening every other value (the measurements:
    docs/results/data/tflite-int8-recipes.json)."""
    ranges = {}
    for key, values in seen.items():
        lows, highs, sizes = (np.array(v, np.float64) for v in zip(*values))
        if reduce == "mean" and np.median(sizes) >= FEW_VALUES:
            ranges[key] = (float(lows.mean()), float(highs.mean()))
        else:
            ranges[key] = (float(lows.min()), float(highs.max()))
    return ranges


def _keeping_interpreter(flatbuffer):
    """A LiteRT interpreter of a float flatbuffer that keeps every tensor after a call (reference
    kernels, no delegate: the values the calibration statistics describe)."""
    import tensorflow_text as tf_text
    from ai_edge_litert.interpreter import InterpreterWithCustomOps, OpResolverType

    return InterpreterWithCustomOps(
        custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
        model_content=flatbuffer,
        experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )


def with_ranges(calibrated, ranges):
    """The calibrated flatbuffer with its statistics replaced by `ranges` (see
    `quantize_calibrated`). A tensor whose range is not finite (SQuAD's score of -inf for no answer)
    loses its statistics and stays float: TFLite's quantizer crashes the process on an infinite
    range (a segmentation fault in its ConvertStatsToQDQs, TensorFlow 2.20)."""
    model = model_object(calibrated)
    for (g, t), (low, high) in ranges.items():
        quantization = model.subgraphs[g].tensors[t].quantization
        quantization.min, quantization.max = [low], [high]
    for graph in model.subgraphs:
        for tensor in graph.tensors:
            stats = tensor.quantization
            if stats is not None and stats.min is not None and len(stats.min):
                if not np.isfinite([*stats.min, *stats.max]).all():
                    tensor.quantization = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))
