"""What a calibrated quantization computes in which type: task.json's `quantization`
(`summary`) and its paragraph on the command line (`describe`, `describe_export`)."""

import json
import os

import tensorflow as tf

from keras_bert.export.flatbuffer_edit import operators
from keras_bert.export.int8_flatbuffer import TABLE_STORAGE
from keras_bert.export.integer_check import float_ops, op_tensor_types
from keras_bert.export.quantization import INTEGER_ONLY
from keras_bert.export.quantization_recipes import recipe
from keras_bert.export.smoothquant import SMOOTHED_SUFFIX

MATMUL_OPS = ("FULLY_CONNECTED", "BATCH_MATMUL")


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
                    for op, name in operators(flatbuffer)
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
