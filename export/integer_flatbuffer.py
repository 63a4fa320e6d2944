"""The edits of the integer-only quantizations around TFLite's quantizer: ranges made symmetric
(`symmetric_ranges`) and int16 zero points of 0 (`symmetric_int16`) for "int16x8_integer_only",
an int32 ARG_MAX (`integer_argmax`), saturating sums calibrated to their bound
(`saturating_minimums`) for "int8_integer_only"."""

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from keras_bert.export.flatbuffer_edit import constant_values, model_object, op_builtin


def symmetric_ranges(calibrated):
    """The calibrated flatbuffer with every range made symmetric about 0, (-m, m) for
    m = max(|min|, |max|): TFLite's int16 kernels take zero points of 0 only."""
    model = model_object(calibrated)
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
        builtin = op_builtin(model, op)
        if builtin == schema.BuiltinOperator.GATHER:
            table = graph.tensors[op.inputs[0]]
            values = constant_values(model, table)
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
    (the 16x8 default of TFLite's older quantizer) kept no more labels and ran slower
    (docs/results/data/tflite-int8-recipes.json)."""
    model = model_object(flatbuffer)
    for graph in model.subgraphs:
        weights = {
            int(op.inputs[1])
            for op in graph.operators
            if op_builtin(model, op) == schema.BuiltinOperator.FULLY_CONNECTED
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
    model = model_object(flatbuffer)
    cast = None
    for graph in model.subgraphs:
        for op in list(graph.operators):
            source = graph.tensors[op.inputs[0]]
            if (
                op_builtin(model, op) != schema.BuiltinOperator.ARG_MAX
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
    grid, which then saturates exactly at the bound (`keras_bert.rewrites.channel_groups`'
    saturating sums; comparing them with their bound tells whether they saturated). Measured
    ranges would end wherever the calibration texts' values did, below or above it. Small
    lookup tables get their whole range (`_table_ranges`, as `symmetric_ranges` for int16): the
    attention bias's mask value, never looked up by the single calibration texts, had quantized
    to 0 and padding went unmasked in batches (docs/results/data/tflite-int8-recipes.json)."""
    model = model_object(calibrated)
    for graph in model.subgraphs:
        _table_ranges(model, graph, SMALL_TABLE_ROWS)
        for op in graph.operators:
            if op_builtin(model, op) != schema.BuiltinOperator.MINIMUM:
                continue
            tensors = [graph.tensors[i] for i in op.inputs]
            bounds = [constant_values(model, t) for t in tensors]
            if sum(b is not None for b in bounds) != 1:
                continue
            bound = float(next(b for b in bounds if b is not None).max())
            for i in [*op.inputs, *op.outputs]:
                stats = graph.tensors[i].quantization
                if stats is not None and stats.max is not None and len(stats.max):
                    stats.max = [bound]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))
