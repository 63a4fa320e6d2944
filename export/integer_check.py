"""What a TFLite flatbuffer computes in which types (`op_tensor_types`), its ops with float
tensors (`float_ops`), and the integer-only assertion (`check_integer_only`)."""

import collections

from tensorflow.lite.python import schema_py_generated as schema

from keras_bert.export.flatbuffer_edit import op_name

FLOAT_TYPES = ("FLOAT32", "FLOAT16", "FLOAT64")
_TYPE_NAMES = {
    code: name for name, code in vars(schema.TensorType).items() if not name.startswith("_")
}


class IntegerOnlyError(ValueError):
    """An "int8_integer_only" model holds an op with float tensors."""


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
            name = op_name(model.OperatorCodes(op.OpcodeIndex()))
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
            name = op_name(model.OperatorCodes(op.OpcodeIndex()))
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
