"""The ops of an exported SavedModel, and the check that a server without Python can run them.

TF Serving runs a SavedModel with TensorFlow's own kernels plus the tensorflow-text ops it
links, and no Python. `list_ops` reads every node of a SavedModel: the top-level graph and
every function of its library (the functions of each signature, nested `tf.function`s,
`tf.cond` branches). `check_ops` fails when an op

- needs the Python runtime (`tf.py_function`, `tf.numpy_function`: EagerPyFunc, PyFunc,
  PyFuncStateless);
- is registered by neither TensorFlow nor tensorflow-text (another library's custom op);
- is a tensorflow-text op newer than the tensorflow-text that TF Serving links. The TF Serving
  images embed tensorflow-text 2.12.1 (tensorflow/serving#4057); the ops below were added after
  it (checked against the op names in the tensorflow-text 2.12.1 wheel's libraries;
  RoundRobinTrim is the op of tensorflow/serving#2267).

The error names each offending op with the node that made it; node names carry the name scopes
of the Keras layers (e.g. `functional/my_layer/EagerPyFunc`), so they point at the layer.

>>> ops = list_ops("serving/sst2/1")                        # doctest: +SKIP
>>> sorted(o.name for o in ops.values() if o.library == "tensorflow-text")  # doctest: +SKIP
['FastBertNormalize', 'FastWordpieceTokenizeWithOffsets', ...]
"""

import dataclasses
import functools
import glob
import importlib.util
import os

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.core.protobuf import saved_model_pb2

TF_SERVING_TEXT_VERSION = "2.12.1"
# tensorflow-text ops that tensorflow-text 2.12.1 does not have.
NEWER_TEXT_OPS = frozenset(
    {"TFText>RoundRobinTrim", "TFText>RoundRobinGenerateMasks", "TFText>Utf8Binarize"}
)
PYTHON_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
# TensorFlow's own ops that tf.raw_ops leaves out (internal names, "_"), which exports use: the
# oneDNN int8 product and LayerNorm of the int8 SavedModels (`keras_bert.export.int8_saved_model`).
TENSORFLOW_INTERNAL_OPS = frozenset({"_QuantizedMatMul", "_MklLayerNorm"})
LIBRARIES = ("tensorflow", "tensorflow-text", "python", "unknown")


class OpCheckError(ValueError):
    """An exported graph holds an op that TF Serving cannot run."""


@dataclasses.dataclass(frozen=True)
class Op:
    """One op type of a SavedModel.

    Attributes:
        name: str, the op type (e.g. "FastBertNormalize").
        library: str, who registers it: "tensorflow", "tensorflow-text", "python" (core ops
            that call back into Python) or "unknown".
        nodes: tuple of str, "<function>/<node name>" of every node of this type ("<graph>"
            for the top-level graph).
    """

    name: str
    library: str
    nodes: tuple


def list_ops(
    saved_model_dir: str | os.PathLike[str], signature: str | None = None
) -> dict[str, Op]:
    """Every op type of a SavedModel (or of one signature) and where it is used.

    Args:
        saved_model_dir: str, a directory with saved_model.pb.
        signature: str or None. Only the ops one signature runs (its graph nodes and the
            functions they call, transitively); None: every node of the file.

    Returns:
        dict op name -> `Op`, sorted by name.
    """
    meta_graph = _read_meta_graph(saved_model_dir)
    graph = meta_graph.graph_def
    functions = {f.signature.name: f for f in graph.library.function}
    if signature is None:
        nodes = [("<graph>", n) for n in graph.node]
        nodes += [(name, n) for name, f in functions.items() for n in f.node_def]
    else:
        if signature not in meta_graph.signature_def:
            raise KeyError(
                f"{saved_model_dir} has no signature {signature!r}; it has "
                f"{sorted(meta_graph.signature_def)}."
            )
        outputs = meta_graph.signature_def[signature].outputs.values()
        nodes = _reachable_nodes([t.name for t in outputs], graph, functions)
    found: dict[str, list[str]] = {}
    for function, node in nodes:
        if node.op not in functions:  # A call of a library function is not an op.
            found.setdefault(node.op, []).append(f"{function}/{node.name}")
    return {name: Op(name, library_of(name), tuple(found[name])) for name in sorted(found)}


def check_ops(saved_model_dir: str | os.PathLike[str]) -> dict[str, Op]:
    """Raises `OpCheckError` if TF Serving (TensorFlow + tensorflow-text 2.12.1, no Python)
    cannot run every op of the SavedModel; returns `list_ops(saved_model_dir)` otherwise."""
    ops = list_ops(saved_model_dir)
    problems = []
    for op in ops.values():
        if op.library == "python":
            reason = (
                "runs Python code (tf.py_function / tf.numpy_function), which TF Serving does "
                "not have"
            )
        elif op.library == "unknown":
            reason = "is registered by neither TensorFlow nor tensorflow-text"
        elif op.name in NEWER_TEXT_OPS:
            reason = (
                f"is newer than the tensorflow-text {TF_SERVING_TEXT_VERSION} that TF Serving links"
            )
        else:
            continue
        where = ", ".join(op.nodes[:3]) + (
            f" and {len(op.nodes) - 3} more" if len(op.nodes) > 3 else ""
        )
        problems.append(f"op {op.name} {reason}; made by node {where}")
    if problems:
        raise OpCheckError(f"{saved_model_dir} cannot be served: " + "; ".join(problems) + ".")
    return ops


def library_of(op_name):
    """ "tensorflow", "tensorflow-text", "python" or "unknown" for an op type."""
    if op_name in PYTHON_OPS:
        return "python"
    if op_name in text_ops():
        return "tensorflow-text"
    if hasattr(tf.raw_ops, op_name) or op_name in TENSORFLOW_INTERNAL_OPS:
        return "tensorflow"
    return "unknown"


@functools.cache
def text_ops():
    """The op types the installed tensorflow-text registers: op name -> its library file."""
    from tensorflow.python.client import pywrap_tf_session

    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None:
        return {}
    names = {}
    for path in sorted(
        glob.glob(os.path.join(spec.submodule_search_locations[0], "python", "ops", "_*.so"))
    ):
        handle = pywrap_tf_session.TF_LoadLibrary(path)
        try:
            op_list = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetOpList(handle))
        finally:
            pywrap_tf_session.TF_DeleteLibraryHandle(handle)
        names.update((op.name, os.path.basename(path)) for op in op_list.op)
    return names


def _read_meta_graph(saved_model_dir):
    path = os.path.join(saved_model_dir, "saved_model.pb")
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"No SavedModel at {saved_model_dir}: {path} does not exist.")
    with tf.io.gfile.GFile(path, "rb") as f:
        return saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0]


def _reachable_nodes(tensor_names, graph, functions):
    """(function name, node) pairs the given top-level tensors depend on, through calls."""
    by_name = {n.name: n for n in graph.node}
    pending = list(tensor_names)
    seen, seen_functions, result = set(), set(), []
    while pending:
        name = pending.pop().lstrip("^").split(":")[0]
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        node = by_name[name]
        result.append(("<graph>", node))
        pending += list(node.input)
        result += _function_nodes(_called_functions(node, functions), functions, seen_functions)
    return result


def _function_nodes(names, functions, seen):
    result = []
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        for node in functions[name].node_def:
            result.append((name, node))
            result += _function_nodes(_called_functions(node, functions), functions, seen)
    return result


def _called_functions(node, functions):
    """Library functions a node calls: StatefulPartitionedCall's f, If/While branches, or
    the node's own op when it is a function."""
    names = [node.op]
    for value in node.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        names += [f.name for f in value.list.func]
    return [n for n in names if n in functions]
