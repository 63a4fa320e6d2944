"""Calibrated integer TFLite: "int8", "int8_integer_only" and "int16x8_integer_only" (see
`keras_bert.export.tflite`).

Each starts from one calibration run of the converter (`_experimental_calibrate_only`: the float
model with every tensor's range over the representative texts) and quantizes it with TFLite's
MLIR quantizer (`mlir_quantize`, what `tf.lite.experimental.QuantizationDebugger` uses for its
selective quantization, with its `denylisted_ops` and `denylisted_nodes`; the debugger itself
cannot run our models, which need tensorflow-text's kernels). Between the two,
`quantize_calibrated` replaces the converter's statistics with reproducible ones
(`keras_bert.export.calibration`), and a tensor whose range is infinite (SQuAD's score of -inf
for "no answer") keeps none (`with_ranges`): the quantizer crashes the process on it.

- "int8": int8 weights (per channel) and int8 activations in every matrix multiply, the other
  ops in float (`INT8_FLOAT_OPS`: LayerNorm's statistics, softmax, GELU, the residual sums...).
  The activations of every matrix multiply are calibrated, except those of the feed-forward
  output (the Keras layer `output_dense`; for SQuAD and NER every matmul,
  `keras_bert.export.quantization_recipes.INT8_RECIPES`), which are quantized per call and per
  row (TFLite's hybrid FULLY_CONNECTED, as "dynamic_range" does for every layer): its input
  (GELU's output) and its output (the residual stream's outlier channels, Bondarenko et al.
  2021) span two orders of magnitude more than most of their values.
  The attention's two BATCH_MATMULs (scores, context) are float (`INT8_FLOAT_OPS`): in int8
  LiteRT's XNNPACK does not run them and the graph falls into pieces, slower on a CPU.
  Every op after the last matrix multiply (the answer from the logits: SQuAD's top-k and exact
  score sums, NER's argmax, the probabilities) is float (`float_after_matmuls`); for SQuAD and
  NER so are the layout ops and the embedding lookups (`INT8_LAYOUT_OPS`: in int8 they put what
  they move, e.g. a per-call matmul's float output, on one more 8-bit grid), the embedding tables
  stored in int8 with a scale per row (NER, `int8_tables`) or in float16 (SQuAD,
  `float16_tables`) and dequantized once.
  SQuAD and NER: every matrix multiply quantizes its activations per call, on inputs scaled per
  channel by SmoothQuant (Xiao et al. 2022, `keras_bert.export.smoothquant.smooth`: X / s in a
  float MUL, s folded into the int8 weights' columns; the same float product, the outlier
  channels' range moved into the weights). Applied after the quantizer (which folds such a MUL
  back into the next matmul's weights) to the matmuls it left in float, the per-call ones.
  SQuAD's int8 weights are rounded by GPTQ (Frantar et al. 2022,
  `keras_bert.export.weight_rounding.gptq`): channel by channel, the channels not yet rounded
  absorbing each one's rounding error as the calibration texts' inputs correlate (X^T X,
  `measure`), which keeps X W^T nearer float than rounding each weight to nearest.
- "int8_integer_only": every op after the tokenizer's string ops in integers (int8 activations
  and weights, int32 biases and indices), traced with the layers' integer-friendly forms
  (`keras_bert.rewrites.integer`); only the signature outputs are dequantized to float
  (DEQUANTIZE as the last op of a float output).
  `keras_bert.export.integer_check.check_integer_only` asserts it from the flatbuffer. The
  residual stream and LayerNorm run in channel groups (`keras_bert.rewrites.channel_groups`); a
  padded key's score is set to the bottom of the scores' grid and its value zeroed
  (`saturating_minimums` gives the small lookup tables their range). Refused for SQuAD
  (`UNSUPPORTED_KINDS`).
- "int16x8_integer_only": the same with int16 activations (TFLite's 16x8 mode: int8 weights
  per channel, int32 biases, every other tensor int16), from the MLIR quantizer with
  `inference_type=QUANTIZED_INT16`. What TensorFlow 2.20's quantizer and kernels need on top:
  no multiplication by a constant (the quantizer makes the constant int8 and then rejects the
  MUL, "binary op operands have same element type": LayerNorm's gamma, the attention's
  1/sqrt(D)), which `keras_bert.rewrites.integer.constant` looks up at run time instead; no
  SQUARED_DIFFERENCE (no int16 kernel: LayerNorm squares the centered values by MUL); zero
  points of 0 and int16 constants (`symmetric_int16`); ARG_MAX of int32 (`integer_argmax`); and
  the attention bias's lookup calibrated to its table's range (`symmetric_ranges`), or padding
  goes unmasked.

The modules, by job: `keras_bert.export.quantization_recipes` (what each kind of model
quantizes how), `keras_bert.export.calibration` (ranges measured in LiteRT),
`keras_bert.export.flatbuffer_edit` (TFLite's object API), `keras_bert.export.int8_flatbuffer`
and `keras_bert.export.integer_flatbuffer` (each quantization's edits around the quantizer),
`keras_bert.export.smoothquant`, `keras_bert.export.weight_rounding` (GPTQ),
`keras_bert.export.integer_check` and `keras_bert.export.quantization_report` (task.json's
`quantization`). The labels and answers each choice kept are on the results page "TFLite and
quantization" (docs/results/data/tflite-int8-recipes.json).
"""

import numpy as np
from tensorflow.compiler.mlir.lite import types_pb2 as _types_pb2
from tensorflow.lite.python import convert as lite_convert

from keras_bert.checkpoints import task_model
from keras_bert.export.calibration import measure, reduce_ranges, with_ranges, with_statistics
from keras_bert.export.flatbuffer_edit import operators
from keras_bert.export.int8_flatbuffer import (
    TABLE_STORAGE,
    float_after_matmuls,
    per_call_int8,
    per_call_outputs,
)
from keras_bert.export.integer_flatbuffer import (
    integer_argmax,
    saturating_minimums,
    symmetric_int16,
    symmetric_ranges,
)
from keras_bert.export.quantization_recipes import (
    INT8_FLOAT_OPS,
    INT8_LAYOUT_OPS,
    LAYER_SITES,
    calibration_reduce,
    recipe,
)
from keras_bert.export.smoothquant import matmul_sites, smooth, smoothed_grams

# quantize -> kinds refused, and why. SQuAD's answer compares exact sums of start and end logits
# and says "no answer" with a score of -inf: neither has an int8 form.
UNSUPPORTED_KINDS = {
    name: {
        "span": "its answer (the best start + end logit sum, compared exactly, and a score of "
        "-inf without an answer) has no integer form",
    }
    for name in ("int8_integer_only", "int16x8_integer_only")
}
# The integer-only quantizations -> their activations' type (`keras_bert.rewrites.integer`).
INTEGER_ONLY = {"int8_integer_only": "int8", "int16x8_integer_only": "int16"}


def check_kind(source, quantize_name):
    """Raises ValueError for a kind in `UNSUPPORTED_KINDS`, naming why and what works instead."""
    why = UNSUPPORTED_KINDS.get(quantize_name, {}).get(source.kind)
    if why:
        raise ValueError(
            f"quantize={quantize_name!r} is not available for {source.kind!r} models "
            f"({source.info.get('task')}): {why}. Use quantize='int8' (int8 matrix multiplies, "
            f"the answer computed in float) or 'dynamic_range'."
        )


def default_texts(source):
    """The calibration texts recorded in a fine-tuned `model/` (`training_texts.tsv`).

    Raises:
        ValueError: the source records none (an encoder, or a model/ written before they were
            recorded): names --representative_texts.
    """
    texts = task_model.read_training_texts(source.path, source.info) if source.model else None
    if not texts:
        raise ValueError(
            f"Integer quantization calibrates the activations on representative_texts, and "
            f"{source.path} records no training texts (fine-tuned before keras-bert recorded "
            f"them, or not a fine-tuned model/): pass representative_texts "
            f"(--representative_texts=FILE, one row per line, the texts of a row tab-separated), "
            f"e.g. the training file's texts."
        )
    return texts


def quantize(calibrated, quantize_name, kind=None, highs=None, grams=None):
    """The quantized flatbuffer of a calibrated one, for "int8" (as `recipe(kind)`; `highs`, the
    channel maxima of the inputs it smooths, see `smooth`; `grams`, X^T X of the per-call
    matmuls' inputs X for GPTQ, {site: [array [in, in]]} in `matmul_sites`' order),
    "int8_integer_only" or "int16x8_integer_only"."""
    if quantize_name == "int8_integer_only":
        return lite_convert.mlir_quantize(saturating_minimums(calibrated))
    if quantize_name == "int16x8_integer_only":
        quantized = lite_convert.mlir_quantize(
            symmetric_ranges(calibrated), inference_type=_types_pb2.QUANTIZED_INT16
        )
        return integer_argmax(symmetric_int16(quantized))
    calibrated = float_after_matmuls(calibrated)
    per_call = per_call_outputs(calibrated, recipe(kind).per_call)
    present = {op for op, _ in operators(calibrated)}
    floats = INT8_FLOAT_OPS + (INT8_LAYOUT_OPS if recipe(kind).float_layout else ())
    quantized = lite_convert.mlir_quantize(
        calibrated,
        denylisted_ops=[op for op in floats if op in present],
        denylisted_nodes=per_call,
    )
    if recipe(kind).smooth_alpha is not None and highs:
        # After the quantizer: it folds a MUL by a constant into the next matmul's weights.
        quantized, scales = smooth(quantized, highs, recipe(kind).smooth_alpha)
        grams = smoothed_grams(grams, scales)
    quantized = per_call_int8(quantized, grams if recipe(kind).gptq else None)
    if not recipe(kind).float_layout:
        return quantized
    return TABLE_STORAGE[recipe(kind).tables].store(quantized)


def quantize_calibrated(calibrated, samples, quantize_name, kind=None):
    """The quantized flatbuffer of the converter's calibrated one: each calibrated tensor's range
    measured on `samples` (`measure`, combined as `calibration_reduce` says), with, for "int8",
    the channel maxima of the inputs the recipe smooths; then `quantize`."""
    int8 = quantize_name == "int8"
    smoothed = recipe(kind).smooth_sites if int8 else ()
    by_gptq = int8 and recipe(kind).gptq
    rounded = [LAYER_SITES[layer] for layer in recipe(kind).per_call] if by_gptq else []
    sites = matmul_sites(calibrated) if smoothed or rounded else {}
    inputs = [(g, x) for site in smoothed for g, x, _ in sites.get(site, [])]
    gram_inputs = [(g, x) for site in rounded for g, x, _ in sites.get(site, [])]
    seen, per_channel, gram = measure(
        calibrated, samples, with_statistics(calibrated), inputs, gram_inputs
    )
    highs = {
        site: [np.abs(per_channel[(g, x)]).max(axis=(0, 1)) for g, x, _ in sites.get(site, [])]
        for site in smoothed
    }
    grams = {  # None where a sample never reached the input: rounded to nearest there.
        site: [gram.get((g, x)) for g, x, _ in sites.get(site, [])] for site in rounded
    }
    ranges = reduce_ranges(seen, calibration_reduce(quantize_name, kind))
    calibrated = with_ranges(calibrated, ranges)
    return quantize(calibrated, quantize_name, kind, highs, grams)
