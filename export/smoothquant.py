"""SmoothQuant (Xiao et al. 2022) on a quantized TFLite flatbuffer: the matrix multiplies found
from the graph (`matmul_sites`), their inputs scaled per channel (`smooth`). The int8 SavedModels'
SmoothQuant, on Keras layers, is `keras_bert.export.int8_smoothing`."""

import collections

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from keras_bert.export.flatbuffer_edit import (
    add_tensor,
    get_kernel,
    model_object,
    op_name,
    opcode_index,
    set_kernel,
)

SMOOTHED_SUFFIX = "/smoothed"  # Name of a smoothed input tensor: its input's name + this.


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
            name = op_name(model.OperatorCodes(op.OpcodeIndex()))
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
    model = model_object(flatbuffer)
    mul = opcode_index(model, schema.BuiltinOperator.MUL)
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
            kernels = [get_kernel(model, graph, graph.operators[i]) for i in ops]
            w_high = np.max([np.abs(kernel).max(axis=0) for kernel in kernels], axis=0)
            scale = x_high**alpha / np.maximum(w_high, 1e-8) ** (1 - alpha)
            scale = np.where(x_high > 0, np.maximum(scale, 1e-5), 1.0).astype(np.float32)
            scales[site].append(scale)
            for i, kernel in zip(ops, kernels):
                set_kernel(model, graph, graph.operators[i], kernel * scale[None, :])
            name = graph.tensors[x].name
            inverse = add_tensor(model, graph, name + b"/inverse_scale", value=1 / scale)
            smoothed = add_tensor(
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
