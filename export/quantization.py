"""Calibrated integer TFLite: "int8" and "int8_integer_only" (see `keras_bert.export.tflite`).

Both start from one calibration run of the converter (`_experimental_calibrate_only`: the float
model with every tensor's range over the representative texts) and quantize it with TFLite's
MLIR quantizer (`mlir_quantize`, what `tf.lite.experimental.QuantizationDebugger` uses for its
selective quantization, with its `denylisted_ops` and `denylisted_nodes`; the debugger itself
cannot run our models, which need tensorflow-text's kernels). Between the two,
`quantize_calibrated` replaces the converter's statistics with reproducible ones, and a tensor
whose range is infinite (SQuAD's score of -inf for "no answer") keeps none (`with_ranges`):
the quantizer crashes the process on it.

- "int8": int8 weights (per channel) and int8 activations in every matrix multiply, the other
  ops in float (`INT8_FLOAT_OPS`: LayerNorm's statistics, softmax, GELU, the residual sums...).
  The activations of every matrix multiply are calibrated, except those of the feed-forward
  output (the Keras layer `output_dense`; for SQuAD and NER the feed-forward input as well,
  `INT8_RECIPES`), which are quantized per call and per row (TFLite's hybrid FULLY_CONNECTED,
  as "dynamic_range" does for every layer): its input (GELU's output) and its output (the
  residual stream's outlier channels, Bondarenko et al. 2021) span two orders of magnitude more
  than most of their values. Measured on
  all-MiniLM-L6-v2 fine-tuned on MRPC (408 dev pairs, calibrated by the converter on 300 training
  pairs), labels as the float32 model's: every op int8 87.5%; only the matrix multiplies int8
  93.9% (95.9% of the decided); that, with the feed-forward output's matrix multiply in float,
  98.0% (100% of the decided); with every elementwise op int8 as well 86.3%. This recipe with
  measured ranges (`reduce_ranges`): 98.3-98.8% (99.7-100% of the decided), the speed of
  "dynamic_range".
  The attention's two BATCH_MATMULs (scores, context) are float (`INT8_FLOAT_OPS`): in int8 they
  cost 0.65x the speed on a CPU (LiteRT's XNNPACK does not run them; the graph falls into pieces).
  Every op after the last matrix multiply (the answer from the logits: SQuAD's top-k and exact
  score sums, NER's argmax, the probabilities) is float (`float_after_matmuls`); for SQuAD and
  NER so are the layout ops and the embedding lookups (`INT8_LAYOUT_OPS`: in int8 they put what
  they move, e.g. a per-call matmul's float output, on one more 8-bit grid), the embedding tables
  stored in int8 with a scale per row (NER, `int8_tables`) or in float16 (SQuAD,
  `float16_tables`) and dequantized once; on MRPC that lowered classification's labels kept from
  98.3% to 97.6%.
  SQuAD and NER (`INT8_RECIPES`): every matrix multiply quantizes its activations per call, on
  inputs scaled per channel by SmoothQuant (Xiao et al. 2022, `smooth`: X / s in a float MUL, s
  folded into the int8 weights' columns; the same float product, the outlier channels' range
  moved into the weights). Applied after the quantizer (which folds such a MUL back into the
  next matmul's weights) to the matmuls it left in float, the per-call ones.
  SQuAD's int8 weights are rounded by GPTQ (Frantar et al. 2022, `gptq`): channel by channel, the
  channels not yet rounded absorbing each one's rounding error as the calibration texts' inputs
  correlate (X^T X, `measure`), which keeps X W^T nearer float than rounding each weight to
  nearest. On SQuAD, the float32 model with only its weights rounded changed 50 of 2,761
  held-out training answers rounded to nearest and 33 by GPTQ; NER's entity lists did not gain.
- "int8_integer_only": every op after the tokenizer's string ops in integers (int8 activations
  and weights, int32 biases and indices), traced with the layers' integer-friendly forms
  (`keras_bert.export.integer`); only the signature outputs are dequantized to float
  (DEQUANTIZE as the last op of a float output). `check_integer_only` asserts it from the
  flatbuffer. The residual stream and LayerNorm run in channel groups
  (`keras_bert.export.channel_groups`); a padded key's score is set to the bottom of the scores'
  grid and its value zeroed (`saturating_minimums` gives the small lookup tables their range).
  Refused for SQuAD (`UNSUPPORTED_KINDS`).
- "int16x8_integer_only": the same with int16 activations (TFLite's 16x8 mode: int8 weights
  per channel, int32 biases, every other tensor int16), from the MLIR quantizer with
  `inference_type=QUANTIZED_INT16`. What TensorFlow 2.20's quantizer and kernels need on top:
  no multiplication by a constant (the quantizer makes the constant int8 and then rejects the
  MUL, "binary op operands have same element type": LayerNorm's gamma, the attention's
  1/sqrt(D)), which `keras_bert.export.integer.constant` looks up at run time instead; no
  SQUARED_DIFFERENCE (no int16 kernel: LayerNorm squares the centered values by MUL); zero
  points of 0 and int16 constants (`symmetric_int16`); ARG_MAX of int32 (`integer_argmax`); and
  the attention bias's lookup calibrated to its table's range (`symmetric_ranges`), or padding
  goes unmasked. MRPC above: 98.3% of the labels (99.7% of the decided), at 0.13x the speed of
  "dynamic_range" on a CPU (TFLite's int16 kernels are reference code).
"""

import collections
import json
import os

import numpy as np
import tensorflow as tf
from tensorflow.compiler.mlir.lite import types_pb2 as _types_pb2
from tensorflow.lite.python import convert as lite_convert
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from keras_bert.checkpoints import task_model

# quantize -> kinds refused, and why. SQuAD's answer compares exact sums of start and end logits
# and says "no answer" with a score of -inf: neither has an int8 form.
UNSUPPORTED_KINDS = {
    name: {
        "span": "its answer (the best start + end logit sum, compared exactly, and a score of "
        "-inf without an answer) has no integer form",
    }
    for name in ("int8_integer_only", "int16x8_integer_only")
}
# The integer-only quantizations -> their activations' type (`keras_bert.export.integer`).
INTEGER_ONLY = {"int8_integer_only": "int8", "int16x8_integer_only": "int16"}
# int8: ops kept in float (by TFLite builtin name; ops not in the model are ignored).
INT8_FLOAT_OPS = (
    "ADD",
    "BATCH_MATMUL",
    "DIV",
    "GELU",
    "MEAN",
    "MUL",
    "NEG",
    "RSQRT",
    "SOFTMAX",
    "SQUARED_DIFFERENCE",
    "SUB",
    "TANH",
)
# int8 with `Int8Recipe.float_layout`: layout ops and the embedding lookups kept in float as well
# (in int8 they requantize what they move, a per-call matmul's float output or the embedding
# tables, onto one more 8-bit grid); the tables are then stored by `int8_tables`.
INT8_LAYOUT_OPS = ("EXPAND_DIMS", "GATHER", "RESHAPE", "STRIDED_SLICE", "TRANSPOSE")


SMOOTHED_SUFFIX = "/smoothed"  # Name of a smoothed input tensor: its input's name + this.
# The matrix multiplies `matmul_sites` tells apart, by the Keras layers they compute.
LAYER_SITES = {
    "query_key_value": "qkv",
    "attention_output_dense": "attention_output",
    "intermediate_dense": "intermediate",
    "output_dense": "output",
    "head": "head",
}
SMOOTH_SITES = tuple(LAYER_SITES.values())


class Int8Recipe(
    collections.namedtuple(
        "Int8Recipe",
        ["per_call", "reduce", "smooth_alpha", "smooth_sites", "float_layout", "gptq", "tables"],
        defaults=(None, (), False, False, "int8"),
    )
):
    """How "int8" quantizes a kind of model: `per_call`, the Keras layers (of `LAYER_SITES`)
    whose FULLY_CONNECTED quantizes its activations per call (found from the graph,
    `matmul_sites`; the other matmuls are calibrated); `reduce`, how the calibration texts'
    ranges combine (`reduce_ranges`); `smooth_alpha` and `smooth_sites`, SmoothQuant's migration
    strength and the sites (of `SMOOTH_SITES`, per-call ones) whose inputs it scales (`smooth`;
    None: no smoothing); `float_layout`, `INT8_LAYOUT_OPS` in float and the embedding tables
    stored as `tables` says (of `TABLE_STORAGE`: "int8", a scale per row, `int8_tables`, or
    "float16", `float16_tables`); `gptq`, the per-call matmuls' int8 weights rounded by GPTQ
    (`gptq`, on the calibration texts' inputs) instead of to the nearest step."""


# int8: by kind ("default": every kind not named). Classification reads one pooled vector: the
# feed-forward output per call, mean ranges (MRPC, see the module docstring). SQuAD and NER read
# every token's logits, where calibrated int8 loses more. Chosen on their training questions and
# sentences not calibrated on (415 SQuAD v1.1 questions, 2,139 CoNLL-2003 sentences; answers as
# float32's, layout ops float): the feed-forward matmuls per call, the others calibrated, 95.9% and
# 98.8%; every matmul per call 97.4%, 99.1%; that with SmoothQuant on every matmul input, alpha
# 0.3/0.4/0.5/0.6/0.8/0.9: SQuAD 97.1/98.6/98.1/98.8/96.9/95.9%,
# CoNLL 99.4/99.4/99.8/99.5/99.3/98.8%.
# (SmoothQuant inserted before the quantizer, which folds its MUL into the matmuls' weights, with
# the feed-forward matmuls per call: 97.8% and 99.5% at best.)
_EVERY_MATMUL_PER_CALL = Int8Recipe(tuple(LAYER_SITES), "minmax", 0.5, SMOOTH_SITES, True)
# SQuAD's weights rounded by GPTQ (`gptq`), chosen on the same kind of texts (2,761 SQuAD training
# questions and 2,139 CoNLL sentences not calibrated on; answers as float32's): the float32 model
# with only its matmul weights in int8 changed 50 answers rounded to nearest, 39 by GPTQ, 33 by GPTQ
# in the order of decreasing input energy; the whole recipe 63 and 48 (with alpha 0.4/0.6/0.7 57,
# 61, 64; damping 0.001 53; sequential GPTQ, each layer's X^T X from the int8 model with the layers
# below rounded, 57). CoNLL's entity lists: 9 differ rounded to nearest, 11 by GPTQ.
# SQuAD's embedding tables in float16 instead of int8 per row: the RMS change of the best span's
# score (start + end logit) on kept answers, the continuous measure behind the flips, fell from
# 0.0635 to 0.0558 on held-out training articles (calibrated on 25 of the 38, measured on the other
# 13; 0.0570 with float32 tables), so the int8 tables carried a fifth of its variance; the same
# split's flip counts (50 and 51 of 2,479) are within their noise. On dev (README): 58 of 1,988
# answers change with the recorded calibration texts (63 with int8 tables), 51 and 67 with two
# other samples of 300: the 97% bar (59) holds for the default calibration, not for every sample.
INT8_RECIPES = {
    "default": Int8Recipe(("output_dense",), "mean"),
    "span": _EVERY_MATMUL_PER_CALL._replace(gptq=True, tables="float16"),
    "token_classification": _EVERY_MATMUL_PER_CALL,
}


def recipe(kind):
    """The `Int8Recipe` of a kind of model."""
    return INT8_RECIPES.get(kind, INT8_RECIPES["default"])


MATMUL_OPS = ("FULLY_CONNECTED", "BATCH_MATMUL")
FLOAT_TYPES = ("FLOAT32", "FLOAT16", "FLOAT64")
_BUILTIN_NAMES = {
    code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")
}
_TYPE_NAMES = {
    code: name for name, code in vars(schema.TensorType).items() if not name.startswith("_")
}


class IntegerOnlyError(ValueError):
    """An "int8_integer_only" model holds an op with float tensors."""


def calibration_reduce(quantize_name, kind=None):
    """How `reduce_ranges` combines the calibration texts' ranges for a quantization: "int8"
    as `recipe(kind)`, "int16x8_integer_only" the overall min and max (16 bits hold the outlier
    channels without saturating them), "int8_integer_only" the mean."""
    if quantize_name == "int8":
        return recipe(kind).reduce
    return "minmax" if quantize_name == "int16x8_integer_only" else "mean"


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
    present = {op for op, _ in _operators(calibrated)}
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
        calibrated, samples, _with_statistics(calibrated), inputs, gram_inputs
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


def float_after_matmuls(calibrated):
    """The calibrated flatbuffer without the statistics of every op that computes no matrix
    multiply's input (the ops after the model's last FULLY_CONNECTED: the answer from the logits),
    which the quantizer then leaves in float ("int8"). Without it, it quantizes them as well:
    SQuAD's top-k of the span logits and its exact score sums, NER's argmax, in 8 bits."""
    model = _model_object(calibrated)
    matmul = {
        i
        for i, code in enumerate(model.operatorCodes)
        if max(code.builtinCode, code.deprecatedBuiltinCode)
        == schema.BuiltinOperator.FULLY_CONNECTED
    }
    for graph in model.subgraphs:
        producer = {int(t): i for i, op in enumerate(graph.operators) for t in op.outputs}
        needed = set()
        todo = [i for i, op in enumerate(graph.operators) if op.opcodeIndex in matmul]
        while todo:  # The matmuls and every op they depend on.
            i = todo.pop()
            if i not in needed:
                needed.add(i)
                todo.extend(producer[int(t)] for t in graph.operators[i].inputs if t in producer)
        for i, op in enumerate(graph.operators):
            if i not in needed:
                for t in op.outputs:
                    graph.tensors[t].quantization = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def per_call_outputs(flatbuffer, layers):
    """Output names of the FULLY_CONNECTED ops of the Keras `layers` (of `LAYER_SITES`), found
    from the graph (`matmul_sites`)."""
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = matmul_sites(flatbuffer)
    return sorted(
        model.Subgraphs(g).Tensors(model.Subgraphs(g).Operators(i).Outputs(0)).Name().decode()
        for layer in layers
        for g, _, ops in found.get(LAYER_SITES[layer], [])
        for i in ops
    )


def _operators(flatbuffer):
    """(op name, name of its first output tensor) of every op of every subgraph."""
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            yield (
                _op_name(model.OperatorCodes(op.OpcodeIndex())),
                graph.Tensors(op.Outputs(0)).Name().decode(),
            )


def _op_name(code):
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == schema.BuiltinOperator.CUSTOM:
        return code.CustomCode().decode()
    return _BUILTIN_NAMES[builtin]


def per_call_int8(flatbuffer, grams=None):
    """The quantized flatbuffer with its FULLY_CONNECTED ops left with float weights (those the
    quantizer was told to skip; it renames their outputs, e.g. after a smoothed input) turned
    into hybrid ones: int8 weights (symmetric, per output channel), activations quantized per
    call and row (`asymmetric_quantize_inputs`), as TFLite's dynamic-range quantizer writes them.
    The weights are rounded to nearest, or by `gptq` where `grams` ({site: [X^T X of each input
    X there, or None]}, in `matmul_sites`' order for this flatbuffer) has their input's."""
    model = _model_object(flatbuffer)
    gram_of = {
        (g, i): gram
        for site, values in (grams or {}).items()
        for (g, _, ops), gram in zip(matmul_sites(flatbuffer).get(site, []), values)
        for i in ops
        if gram is not None
    }
    for g, graph in enumerate(model.subgraphs):
        for i, op in enumerate(graph.operators):
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            if builtin != schema.BuiltinOperator.FULLY_CONNECTED:
                continue
            weights = graph.tensors[op.inputs[1]]
            if weights.type != schema.TensorType.FLOAT32:
                continue
            kernel = _kernel(model, graph, op)
            if (g, i) in gram_of:
                values, scale = gptq(kernel, gram_of[(g, i)])
            else:
                values, scale = _round_rows(kernel)  # Per output channel.
            _store_int8(model, weights, values, scale)
            op.builtinOptions.asymmetricQuantizeInputs = True
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def _row_scales(values):
    """Symmetric int8 scales of the rows of [R, C] values: max |row| / 127."""
    return np.maximum(np.abs(values).max(axis=1), 1e-12) / 127.0


def _round_rows(values):
    """(int8 [R, C], scales [R]): [R, C] values rounded to nearest on their row's int8 grid."""
    scale = _row_scales(values)
    return np.clip(np.round(values / scale[:, None]), -127, 127).astype(np.int8), scale


def _store_int8(model, tensor, values, scale):
    """Makes a float constant `tensor` of the model object int8 `values` with a symmetric scale
    per row (dimension 0)."""
    model.buffers[tensor.buffer].data = np.frombuffer(values.tobytes(), np.uint8)
    tensor.type = schema.TensorType.INT8
    tensor.quantization = schema.QuantizationParametersT()
    tensor.quantization.scale = np.asarray(scale, np.float32).tolist()
    tensor.quantization.zeroPoint = [0] * len(scale)
    tensor.quantization.quantizedDimension = 0


def int8_tables(flatbuffer, smallest=256):
    """The flatbuffer with each float constant table a GATHER reads (the embeddings, at least
    `smallest` values) stored as int8 with a scale per row (symmetric) and dequantized before it
    (a DEQUANTIZE of a constant, which LiteRT computes once): a quarter of the size, the lookups
    in float on the tables' values within half a step of their row's 8-bit grid."""
    return _dequantized_tables(flatbuffer, smallest, _store_int8_rows)


def _store_int8_rows(model, tensor, values):
    """Makes a float32 constant `tensor` of the model object int8 `values` [rows, -1] rounded to
    nearest with a scale per row."""
    _store_int8(model, tensor, *_round_rows(values))


def float16_tables(flatbuffer, smallest=256):
    """The flatbuffer with each float constant table a GATHER reads (at least `smallest` values)
    stored as float16 and dequantized before it, as `int8_tables` does: half the size, the
    lookups on the tables' values rounded to float16 (a relative error below 2^-11)."""
    return _dequantized_tables(flatbuffer, smallest, _store_float16)


def _store_float16(model, tensor, values):
    """Makes a float32 constant `tensor` of the model object float16 `values`."""
    model.buffers[tensor.buffer].data = np.frombuffer(values.astype(np.float16).tobytes(), np.uint8)
    tensor.type = schema.TensorType.FLOAT16


def _dequantized_tables(flatbuffer, smallest, store):
    """The flatbuffer with each float32 constant table of a GATHER (at least `smallest` values)
    rewritten by `store(model, table, values [rows, -1])` and a DEQUANTIZE to float32 before the
    lookup."""
    model = _model_object(flatbuffer)
    dequantize = _opcode(model, schema.BuiltinOperator.DEQUANTIZE)
    for graph in model.subgraphs:
        inserted = []
        for index, op in enumerate(graph.operators):
            code = model.operatorCodes[op.opcodeIndex]
            if max(code.builtinCode, code.deprecatedBuiltinCode) != schema.BuiltinOperator.GATHER:
                continue
            table = graph.tensors[op.inputs[0]]
            data = model.buffers[table.buffer].data
            if table.type != schema.TensorType.FLOAT32 or data is None or len(data) < 4 * smallest:
                continue
            values = np.frombuffer(np.asarray(data, np.uint8).tobytes(), np.float32)
            floats = _add_tensor(model, graph, table.name + b"/dequantized", like=table)
            store(model, table, values.reshape(table.shape[0], -1))
            step = schema.OperatorT()
            step.opcodeIndex, step.inputs, step.outputs = dequantize, [op.inputs[0]], [floats]
            op.inputs[0] = floats
            inserted.append((index, step))
        for index, step in reversed(inserted):
            graph.operators.insert(index, step)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


# Int8Recipe.tables -> how the embedding tables are stored, and task.json's description of it.
TableStorage = collections.namedtuple("TableStorage", ["store", "description"])
TABLE_STORAGE = {
    "int8": TableStorage(int8_tables, "int8, a scale per row, dequantized once"),
    "float16": TableStorage(float16_tables, "float16, dequantized once"),
}


def op_tensor_types(flatbuffer):
    """Every op of a flatbuffer with the types of its tensors.

    Returns:
        dict op name -> sorted list of distinct "IN, IN -> OUT" strings (tensor types, e.g.
        "INT8, INT8, INT32 -> INT8" for an int8 FULLY_CONNECTED), sorted by op name.
    """
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = collections.defaultdict(set)
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            types = [
                [_TYPE_NAMES[graph.Tensors(t).Type()] for t in indices if t >= 0]
                for indices in (op.InputsAsNumpy(), op.OutputsAsNumpy())
            ]
            name = _op_name(model.OperatorCodes(op.OpcodeIndex()))
            found[name].add(f"{', '.join(types[0])} -> {', '.join(types[1])}")
    return {name: sorted(found[name]) for name in sorted(found)}


def float_ops(flatbuffer):
    """Op names with a float tensor (input or output), except DEQUANTIZE ops whose float output
    is a signature output (an integer model's answer handed back as float)."""
    outputs = _signature_outputs(flatbuffer)
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = set()
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            name = _op_name(model.OperatorCodes(op.OpcodeIndex()))
            tensors = [t for t in (*op.InputsAsNumpy(), *op.OutputsAsNumpy()) if t >= 0]
            if not any(_TYPE_NAMES[graph.Tensors(t).Type()] in FLOAT_TYPES for t in tensors):
                continue
            if name == "DEQUANTIZE" and all((g, t) in outputs for t in op.OutputsAsNumpy()):
                continue
            found.add(name)
    return sorted(found)


def _signature_outputs(flatbuffer):
    """{(subgraph, tensor index)} of every signature's outputs."""
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = set()
    for s in range(model.SignatureDefsLength()):
        signature = model.SignatureDefs(s)
        for i in range(signature.OutputsLength()):
            found.add((signature.SubgraphIndex(), signature.Outputs(i).TensorIndex()))
    return found


def check_integer_only(flatbuffer, quantize_name="int8_integer_only"):
    """Raises `IntegerOnlyError` naming every op with float tensors (and their types) unless
    there is none beyond the dequantized signature outputs; returns `op_tensor_types`."""
    types = op_tensor_types(flatbuffer)
    bad = float_ops(flatbuffer)
    if bad:
        raise IntegerOnlyError(
            f"quantize={quantize_name!r}: the TFLite model still computes in float in "
            + "; ".join(f"{name} ({' | '.join(types[name])})" for name in bad)
            + ". An integer-only accelerator cannot run these ops; export with quantize='int8' "
            "(float where integers lose the answers) or remove them from the model."
        )
    return types


def summary(flatbuffer, quantize_name, kind=None):
    """What a calibrated quantization computes in which type (task.json's `quantization`)."""
    types = op_tensor_types(flatbuffer)
    matmuls = {name: types[name] for name in MATMUL_OPS if name in types}
    info = {
        "matmul_tensor_types": matmuls,
        "float_ops": float_ops(flatbuffer),
    }
    if quantize_name in INTEGER_ONLY:
        info["activations"] = INTEGER_ONLY[quantize_name]
        info["tensor_types"] = _tensor_types(types)
    if quantize_name == "int8":
        info["per_call_int8_layers"] = list(recipe(kind).per_call)
        info["calibration_ranges"] = recipe(kind).reduce
        if recipe(kind).float_layout:
            info["embedding_tables"] = TABLE_STORAGE[recipe(kind).tables].description
        info["weight_rounding"] = "GPTQ" if recipe(kind).gptq else "nearest"
        if recipe(kind).smooth_alpha is not None:
            info["smoothing"] = {
                "method": "SmoothQuant",
                "alpha": recipe(kind).smooth_alpha,
                "sites": list(recipe(kind).smooth_sites),
                "inputs_smoothed": sum(
                    op == "MUL" and name.endswith(SMOOTHED_SUFFIX)
                    for op, name in _operators(flatbuffer)
                ),
            }
    return info


def _tensor_types(types):
    """The distinct tensor types of `op_tensor_types` (except strings, bytes and booleans)."""
    found = {
        kind.strip()
        for kinds in types.values()
        for signature in kinds
        for kind in signature.replace("->", ",").split(",")
    }
    return sorted(found - {"STRING", "UINT8", "BOOL", ""})


def symmetric_ranges(calibrated):
    """The calibrated flatbuffer with every range made symmetric about 0, (-m, m) for
    m = max(|min|, |max|): TFLite's int16 kernels take zero points of 0 only."""
    model = _model_object(calibrated)
    for graph in model.subgraphs:
        _table_ranges(model, graph)
        for tensor in graph.tensors:
            stats = tensor.quantization
            if stats is not None and stats.min is not None and len(stats.min):
                bound = np.maximum(np.abs(stats.min), np.abs(stats.max))
                stats.min, stats.max = list(-bound), list(bound)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


SMALL_TABLE_ROWS = 16  # int8: a lookup table this small has every row expected at run time.


def _table_ranges(model, graph, max_rows=None):
    """Gives a GATHER from a constant float table of at most `max_rows` rows (None: any) and the
    EXPAND_DIMS and RESHAPEs after it the table's range: batches of one text never look up the
    attention bias's mask value, which would otherwise quantize to 0 (padding unmasked); the sum
    with the scores saturates it. int8 limits it to small tables: a word-embedding table's whole
    range would coarsen the grid of every lookup for the sake of rare rows."""
    ranged = {}
    for op in graph.operators:
        builtin = _builtin(model, op)
        if builtin == schema.BuiltinOperator.GATHER:
            table = graph.tensors[op.inputs[0]]
            values = _constant(model, table)
            if values is not None and (max_rows is None or table.shape[0] <= max_rows):
                ranged[int(op.outputs[0])] = (float(values.min()), float(values.max()))
        elif builtin in (schema.BuiltinOperator.EXPAND_DIMS, schema.BuiltinOperator.RESHAPE):
            if int(op.inputs[0]) in ranged:
                ranged[int(op.outputs[0])] = ranged[int(op.inputs[0])]
    for t, (low, high) in ranged.items():
        stats = graph.tensors[t].quantization
        if stats is not None and stats.min is not None and len(stats.min):
            stats.min, stats.max = [min(low, stats.min[0])], [max(high, stats.max[0])]


def symmetric_int16(flatbuffer):
    """The 16x8-quantized flatbuffer with every int16 tensor symmetric (zero point 0), as
    TFLite's int16 kernels require, and the int8 constants that are not FULLY_CONNECTED weights
    (LayerNorm's epsilon, ...) int16.

    TensorFlow 2.20's MLIR quantizer, asked for int16 activations (`QUANTIZED_INT16`), gives
    a symmetric range (`symmetric_ranges`) a zero point of -1 (ADD then refuses to prepare,
    "input1->params.zero_point != 0"), and constant operands int8. Setting the zero point to 0
    moves the tensor's grid by one step (1/65535 of its range); an int8 constant is requantized
    (symmetric, per tensor) from its values. FULLY_CONNECTED keeps int32 biases: int64 ones
    (the 16x8 default of TFLite's older quantizer) changed no MRPC label, at 0.3x the speed."""
    model = _model_object(flatbuffer)
    for graph in model.subgraphs:
        weights = {
            int(op.inputs[1])
            for op in graph.operators
            if _builtin(model, op) == schema.BuiltinOperator.FULLY_CONNECTED
        }
        for i, tensor in enumerate(graph.tensors):
            q = tensor.quantization
            if q is None or q.scale is None or len(q.scale) != 1:
                continue
            data = model.buffers[tensor.buffer].data
            constant = data is not None and len(data) > 0
            if tensor.type == schema.TensorType.INT8 and constant and i not in weights:
                _as_int16(model.buffers[tensor.buffer], tensor)
            elif tensor.type == schema.TensorType.INT16:
                zero = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
                if constant and zero:  # The same scale (a GATHER's table and its output share it).
                    values = np.frombuffer(data.tobytes(), np.int16).astype(np.int64) - zero
                    model.buffers[tensor.buffer].data = np.frombuffer(
                        np.clip(values, -32768, 32767).astype(np.int16).tobytes(), np.uint8
                    )
                q.zeroPoint = [0]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def _as_int16(buffer, tensor):
    """An int8 constant (one scale) requantized as symmetric int16."""
    q = tensor.quantization
    zero = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
    values = (np.frombuffer(buffer.data.tobytes(), np.int8).astype(np.float64) - zero) * q.scale[0]
    scale = max(float(np.abs(values).max()) if values.size else 0.0, 1e-12) / 32767
    quantized = np.clip(np.round(values / scale), -32767, 32767).astype(np.int16)
    buffer.data = np.frombuffer(quantized.tobytes(), np.uint8)
    tensor.type = schema.TensorType.INT16
    q.scale, q.zeroPoint = [scale], [0]


def integer_argmax(flatbuffer):
    """The flatbuffer with a CAST int16 -> int32 before every ARG_MAX of an int16 tensor
    (TFLite's ARG_MAX has no int16 kernel): the argmax of the quantized values themselves,
    which order as the values they stand for (one positive scale)."""
    model = _model_object(flatbuffer)
    cast = None
    for graph in model.subgraphs:
        for op in list(graph.operators):
            source = graph.tensors[op.inputs[0]]
            if (
                _builtin(model, op) != schema.BuiltinOperator.ARG_MAX
                or source.type != schema.TensorType.INT16
            ):
                continue
            if cast is None:
                cast = len(model.operatorCodes)
                code = schema.OperatorCodeT()
                code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CAST
                code.version = 1
                model.operatorCodes.append(code)
            model.buffers.append(schema.BufferT())
            as_int32 = schema.TensorT()
            as_int32.name, as_int32.type = source.name + b"/int32", schema.TensorType.INT32
            as_int32.shape, as_int32.shapeSignature = source.shape, source.shapeSignature
            as_int32.buffer = len(model.buffers) - 1
            graph.tensors.append(as_int32)
            new = schema.OperatorT()
            new.opcodeIndex, new.inputs = cast, [op.inputs[0]]
            new.outputs = [len(graph.tensors) - 1]
            new.builtinOptionsType = schema.BuiltinOptions.CastOptions
            new.builtinOptions = schema.CastOptionsT()
            new.builtinOptions.inDataType = schema.TensorType.INT16
            new.builtinOptions.outDataType = schema.TensorType.INT32
            graph.operators.insert(graph.operators.index(op), new)
            op.inputs[0] = len(graph.tensors) - 1
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def saturating_minimums(calibrated):
    """The calibrated flatbuffer of `int8_integer_only` with every MINIMUM by a constant bound
    calibrated to end at the bound, input and output: TFLite's quantizer puts them on one int8
    grid, which then saturates exactly at the bound (`keras_bert.export.channel_groups`'
    saturating sums; comparing them with their bound tells whether they saturated). Measured
    ranges would end wherever the calibration texts' values did, below or above it. Small
    lookup tables get their whole range (`_table_ranges`, as `symmetric_ranges` for int16): the
    attention bias's mask value, never looked up by the single calibration texts, had quantized
    to 0 and padding went unmasked (all-MiniLM-L6-v2 on MRPC dev: 97.30% of the labels kept one
    text at a time, 93.87% in batches of 32)."""
    model = _model_object(calibrated)
    for graph in model.subgraphs:
        _table_ranges(model, graph, SMALL_TABLE_ROWS)
        for op in graph.operators:
            if _builtin(model, op) != schema.BuiltinOperator.MINIMUM:
                continue
            tensors = [graph.tensors[i] for i in op.inputs]
            bounds = [_constant(model, t) for t in tensors]
            if sum(b is not None for b in bounds) != 1:
                continue
            bound = float(next(b for b in bounds if b is not None).max())
            for i in [*op.inputs, *op.outputs]:
                stats = graph.tensors[i].quantization
                if stats is not None and stats.max is not None and len(stats.max):
                    stats.max = [bound]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def _constant(model, tensor):
    """A float32 tensor's constant values (flat), or None for an activation."""
    data = model.buffers[tensor.buffer].data
    if data is None or not len(data) or tensor.type != schema.TensorType.FLOAT32:
        return None
    return np.frombuffer(bytes(data), np.float32)


def _model_object(flatbuffer):
    """The flatbuffer as TFLite's object API (`schema.ModelT`), every subgraph's op, tensor,
    input and output lists lists: the object API gives None for an empty one (an IF branch
    that passes its inputs through has no ops), which the passes here iterate."""
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    for graph in model.subgraphs:
        for name in ("operators", "tensors", "inputs", "outputs"):
            if getattr(graph, name) is None:
                setattr(graph, name, [])
    return model


def _builtin(model, op):
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def describe_export(path):
    """`describe` of an export's version directory (its task.json's `quantization`)."""
    with tf.io.gfile.GFile(os.path.join(path, "task.json")) as f:
        return describe(json.load(f)["quantization"])


def describe(info):
    """One paragraph for the command line from `summary`'s dict."""
    lines = [
        f"  {name}: {' | '.join(kinds)}" for name, kinds in info["matmul_tensor_types"].items()
    ]
    float_list = ", ".join(info["float_ops"]) or "none (integer only)"
    lines.append(f"  ops with float tensors: {float_list}")
    if info.get("per_call_int8_layers"):
        lines.append(
            "  activations quantized per call (not calibrated): "
            + ", ".join(info["per_call_int8_layers"])
        )
    if info.get("smoothing"):
        smoothing = info["smoothing"]
        lines.append(
            f"  {smoothing['method']} (alpha {smoothing['alpha']}) on "
            f"{smoothing['inputs_smoothed']} matmul inputs: " + ", ".join(smoothing["sites"])
        )
    if info.get("embedding_tables"):
        lines.append(f"  embedding tables: {info['embedding_tables']}")
    if info.get("weight_rounding") == "GPTQ":
        lines.append("  per-call matmul weights: int8 rounded by GPTQ on the calibration texts")
    if info.get("calibration_ranges"):
        lines.append(
            "  calibrated ranges: "
            + {"mean": "each text's min and max, averaged", "minmax": "overall min and max"}[
                info["calibration_ranges"]
            ]
        )
    return "\n".join(lines)


def _with_statistics(calibrated):
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
    calibration run, which gives different ranges from one run to the next on the same texts
    (seen on all-MiniLM-L6-v2, up to 2x in a feed-forward layer); these are reproducible. "mean"
    averages as the moving averages of quantization-aware training do: rare outliers saturate
    instead of coarsening every other value (all-MiniLM-L6-v2 on MRPC dev, "int8": 98.8% of the
    labels kept against 97.6% with "minmax")."""
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
    model = _model_object(calibrated)
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


# === SmoothQuant (Xiao et al. 2022) ===


def matmul_sites(flatbuffer):
    """{site: [(subgraph, input tensor index, [FULLY_CONNECTED op indices])]} of the matrix
    multiplies with float weights, found from the graph: an input read by three of them is the
    attention's (`qkv`, the block's input: a LayerNorm's output); a matmul whose output feeds a
    GELU is the feed-forward input (`intermediate`), one fed by a GELU its output (`output`); one
    whose input no ADD reads (not a LayerNorm's output: the attention's context) and whose output
    an ADD reads (the residual sum) is `attention_output`; the others (pooler, task head) `head`.
    A `smooth`ed input counts as the input it scales."""
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = collections.defaultdict(list)
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        producer, consumers, matmuls = (
            {},
            collections.defaultdict(list),
            collections.defaultdict(list),
        )
        alias = {}  # smoothed input -> the input it scales
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            name = _op_name(model.OperatorCodes(op.OpcodeIndex()))
            if graph.Tensors(int(op.Outputs(0))).Name().decode().endswith(SMOOTHED_SUFFIX):
                alias[int(op.Outputs(0))] = int(op.Inputs(0))
                continue
            producer.update({int(t): name for t in op.OutputsAsNumpy()})
            for t in op.InputsAsNumpy():
                consumers[int(t)].append(name)
            weights = int(op.Inputs(1)) if name == "FULLY_CONNECTED" else -1
            if weights >= 0 and graph.Tensors(weights).Type() == schema.TensorType.FLOAT32:
                x = int(op.Inputs(0))
                matmuls[alias.get(x, x)].append((i, int(op.Outputs(0))))
        for x, ops in matmuls.items():
            outputs = [consumers[out] for _, out in ops]
            if len(ops) == 3:
                site = "qkv"
            elif len(ops) > 1:
                continue
            elif "GELU" in outputs[0]:
                site = "intermediate"
            elif producer.get(x) == "GELU":
                site = "output"
            elif "ADD" in outputs[0] and "ADD" not in consumers[x]:
                site = "attention_output"
            else:
                site = "head"
            found[site].append((g, x, [i for i, _ in ops]))
    return dict(found)


def smooth(flatbuffer, highs, alpha):
    """The flatbuffer with SmoothQuant's per-channel scales (Xiao et al. 2022) on the inputs X of
    the float matrix multiplies at the sites of `highs` ({site of `SMOOTH_SITES`: [max |X_j| over
    the calibration texts, per channel, of each input `matmul_sites` finds there, in its order]}).

    For an input X (channels j) read by matmuls of weights W (TFLite's [out, in]),
    s_j = max|X_j|^alpha / max|W_.j|^(1 - alpha), over every matmul reading X. A float MUL
    computes X / s before them and their weights' columns are multiplied by s: the same product
    in exact arithmetic, with the outlier channels' range moved into the weights (quantized per
    output channel by `per_call_int8`). BERT's LayerNorm output also feeds the residual sum, so
    1/s is not folded into its gamma and beta. Applied to the quantized flatbuffer (the
    quantizer would fold the MUL back into the weights), whose float matmuls are the per-call
    ones.

    Returns:
        (flatbuffer, {site: [s of each input smoothed there, in `highs`' order]}).

    Raises:
        ValueError: the flatbuffer has a different number of inputs at a site than `highs`.
    """
    found = matmul_sites(flatbuffer)
    model = _model_object(flatbuffer)
    mul = _opcode(model, schema.BuiltinOperator.MUL)
    inserted = collections.defaultdict(list)  # subgraph -> [(before op index, MUL op)]
    scales = collections.defaultdict(list)
    for site, site_highs in highs.items():
        groups = found.get(site, [])
        if len(groups) != len(site_highs):
            raise ValueError(
                f"SmoothQuant: {len(groups)} float matmul inputs at {site!r}, measured "
                f"{len(site_highs)} (smooth only the matmuls quantized per call)."
            )
        for (g, x, ops), x_high in zip(groups, site_highs):
            graph = model.subgraphs[g]
            kernels = [_kernel(model, graph, graph.operators[i]) for i in ops]
            w_high = np.max([np.abs(kernel).max(axis=0) for kernel in kernels], axis=0)
            scale = x_high**alpha / np.maximum(w_high, 1e-8) ** (1 - alpha)
            scale = np.where(x_high > 0, np.maximum(scale, 1e-5), 1.0).astype(np.float32)
            scales[site].append(scale)
            for i, kernel in zip(ops, kernels):
                _set_kernel(model, graph, graph.operators[i], kernel * scale[None, :])
            name = graph.tensors[x].name
            inverse = _add_tensor(model, graph, name + b"/inverse_scale", value=1 / scale)
            smoothed = _add_tensor(
                model, graph, name + SMOOTHED_SUFFIX.encode(), like=graph.tensors[x]
            )
            op = schema.OperatorT()
            op.opcodeIndex, op.inputs, op.outputs = mul, [x, inverse], [smoothed]
            op.builtinOptionsType = schema.BuiltinOptions.MulOptions
            op.builtinOptions = schema.MulOptionsT()
            for i in ops:
                graph.operators[i].inputs[0] = smoothed
            inserted[g].append((min(ops), op))
    for g, ops in inserted.items():
        for before, op in sorted(ops, key=lambda item: -item[0]):  # Later ones first.
            model.subgraphs[g].operators.insert(before, op)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model)), dict(scales)


def smoothed_grams(grams, scales):
    """`grams` (X^T X of matmul inputs X, {site: [array or None]}) of the inputs X / s that
    `smooth` made with `scales` (its second result; sites it did not smooth keep theirs)."""
    if not grams:
        return grams
    return {
        site: [
            gram / np.outer(s, s) if s is not None and gram is not None else gram
            for gram, s in zip(values, scales.get(site, [None] * len(values)))
        ]
        for site, values in grams.items()
    }


def gptq(kernel, gram, damp=0.01):
    """int8 weights of a matmul by GPTQ (Frantar et al. 2022): each input channel (column of
    `kernel`, TFLite's [out, in]) is rounded in turn, in the order of decreasing input energy
    (the diagonal of `gram`: "act order"), and the channels not yet rounded absorb its rounding
    error as the inputs' correlations say, so that X W^T (not W itself) stays closest to float
    over the calibration inputs X (`gram` = X^T X). The scales are round to nearest's (symmetric,
    per output channel, max |W| / 127): only which step each weight takes changes.

    Args:
        kernel: float array [out, in].
        gram: float array [in, in], X^T X of the calibration inputs.
        damp: added to the diagonal, as a fraction of its mean (the inverse's stability).

    Returns:
        (int8 array [out, in], float32 scales [out]).
    """
    w = np.asarray(kernel, np.float64)
    scale = _row_scales(w)
    order = np.argsort(-np.diag(gram), kind="stable")
    w = w[:, order].copy()
    h = np.array(gram, np.float64)[np.ix_(order, order)]
    dead = np.diag(h) == 0  # Inputs always 0: their weights do not matter.
    h[dead, dead] = 1.0
    h[np.diag_indices_from(h)] += damp * np.mean(np.diag(h))
    # Upper Cholesky factor of H^-1: row i holds how the later channels absorb channel i's error.
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    values = np.zeros(w.shape, np.int8)
    for i in range(w.shape[1]):
        step = np.clip(np.round(w[:, i] / scale), -127, 127)
        values[:, i] = step
        error = (w[:, i] - step * scale) / u[i, i]
        w[:, i + 1 :] -= np.outer(error, u[i, i + 1 :])
    return values[:, np.argsort(order)], scale.astype(np.float32)


def _opcode(model, builtin):
    for i, code in enumerate(model.operatorCodes):
        if max(code.builtinCode, code.deprecatedBuiltinCode) == builtin:
            return i
    code = schema.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, builtin, 1
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1


def _kernel(model, graph, op):
    weights = graph.tensors[op.inputs[1]]
    data = model.buffers[weights.buffer].data
    return np.frombuffer(np.asarray(data, np.uint8).tobytes(), np.float32).reshape(weights.shape)


def _set_kernel(model, graph, op, kernel):
    buffer = model.buffers[graph.tensors[op.inputs[1]].buffer]
    buffer.data = np.frombuffer(kernel.astype(np.float32).tobytes(), np.uint8)


def _add_tensor(model, graph, name, value=None, like=None):
    """Appends a float32 tensor to `graph`, a constant if `value` is given, else of the shape of
    tensor `like`; returns its index."""
    tensor = schema.TensorT()
    tensor.name, tensor.type, tensor.buffer = name, schema.TensorType.FLOAT32, 0
    if value is not None:
        value = np.asarray(value, np.float32)
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(value.tobytes(), np.uint8)
        model.buffers.append(buffer)
        tensor.buffer, tensor.shape = len(model.buffers) - 1, list(value.shape)
    else:
        tensor.shape, tensor.shapeSignature = like.shape, like.shapeSignature
    graph.tensors.append(tensor)
    return len(graph.tensors) - 1
