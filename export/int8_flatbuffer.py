"""The edits of "int8" around TFLite's quantizer: the ops after the last matrix multiply left
in float (`float_after_matmuls`), the per-call matmuls found (`per_call_outputs`) and made hybrid
(`per_call_int8`), the embedding tables stored in int8 or float16 (`TABLE_STORAGE`)."""

import collections

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from keras_bert.export.flatbuffer_edit import add_tensor, get_kernel, model_object, opcode_index
from keras_bert.export.quantization_recipes import LAYER_SITES
from keras_bert.export.smoothquant import matmul_sites
from keras_bert.export.weight_rounding import gptq, round_rows


def float_after_matmuls(calibrated):
    """The calibrated flatbuffer without the statistics of every op that computes no matrix
    multiply's input (the ops after the model's last FULLY_CONNECTED: the answer from the logits),
    which the quantizer then leaves in float ("int8"). Without it, it quantizes them as well:
    SQuAD's top-k of the span logits and its exact score sums, NER's argmax, in 8 bits."""
    model = model_object(calibrated)
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


def per_call_int8(flatbuffer, grams=None):
    """The quantized flatbuffer with its FULLY_CONNECTED ops left with float weights (those the
    quantizer was told to skip; it renames their outputs, e.g. after a smoothed input) turned
    into hybrid ones: int8 weights (symmetric, per output channel), activations quantized per
    call and row (`asymmetric_quantize_inputs`), as TFLite's dynamic-range quantizer writes them.
    The weights are rounded to nearest, or by `gptq` where `grams` ({site: [X^T X of each input
    X there, or None]}, in `matmul_sites`' order for this flatbuffer) has their input's."""
    model = model_object(flatbuffer)
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
            kernel = get_kernel(model, graph, op)
            if (g, i) in gram_of:
                values, scale = gptq(kernel, gram_of[(g, i)])
            else:
                values, scale = round_rows(kernel)  # Per output channel.
            _store_int8(model, weights, values, scale)
            op.builtinOptions.asymmetricQuantizeInputs = True
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


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
    _store_int8(model, tensor, *round_rows(values))


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
    model = model_object(flatbuffer)
    dequantize = opcode_index(model, schema.BuiltinOperator.DEQUANTIZE)
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
            floats = add_tensor(model, graph, table.name + b"/dequantized", like=table)
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
