"""TFLite flatbuffers read and edited: the ops and their names, TFLite's object API
(`schema.ModelT`) and the few edits the quantization passes share (constants, kernels, new
tensors and op codes)."""

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

_BUILTIN_NAMES = {
    code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")
}


def operators(flatbuffer):
    """(op name, name of its first output tensor) of every op of every subgraph."""
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            yield (
                op_name(model.OperatorCodes(op.OpcodeIndex())),
                graph.Tensors(op.Outputs(0)).Name().decode(),
            )


def op_name(code):
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == schema.BuiltinOperator.CUSTOM:
        return code.CustomCode().decode()
    return _BUILTIN_NAMES[builtin]


def constant_values(model, tensor):
    """A float32 tensor's constant values (flat), or None for an activation."""
    data = model.buffers[tensor.buffer].data
    if data is None or not len(data) or tensor.type != schema.TensorType.FLOAT32:
        return None
    return np.frombuffer(bytes(data), np.float32)


def model_object(flatbuffer):
    """The flatbuffer as TFLite's object API (`schema.ModelT`), every subgraph's op, tensor,
    input and output lists lists: the object API gives None for an empty one (an IF branch
    that passes its inputs through has no ops), which the passes here iterate."""
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    for graph in model.subgraphs:
        for name in ("operators", "tensors", "inputs", "outputs"):
            if getattr(graph, name) is None:
                setattr(graph, name, [])
    return model


def op_builtin(model, op):
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def opcode_index(model, builtin):
    for i, code in enumerate(model.operatorCodes):
        if max(code.builtinCode, code.deprecatedBuiltinCode) == builtin:
            return i
    code = schema.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, builtin, 1
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1


def get_kernel(model, graph, op):
    weights = graph.tensors[op.inputs[1]]
    data = model.buffers[weights.buffer].data
    return np.frombuffer(np.asarray(data, np.uint8).tobytes(), np.float32).reshape(weights.shape)


def set_kernel(model, graph, op, kernel):
    buffer = model.buffers[graph.tensors[op.inputs[1]].buffer]
    buffer.data = np.frombuffer(kernel.astype(np.float32).tobytes(), np.uint8)


def add_tensor(model, graph, name, value=None, like=None):
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
