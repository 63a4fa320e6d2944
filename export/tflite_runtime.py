"""The interpreter side of TFLite exports: loading a model with tensorflow-text's kernels, feeding
it strings, and the check every export passes before its version appears (`verify`: the
interpreter's answers on probe texts against the TensorFlow functions they were converted from,
each output on its own scale, see `keras_bert.export.checks`). `keras_bert.export.tflite`
re-exports these names."""

import numpy as np
import tensorflow as tf

from keras_bert.export import checks
from keras_bert.export.saved_model import PROBE_TEXTS

FLOAT_ATOL = 1e-4  # float32 TFLite against TensorFlow (different kernels, same math).
# Quantized TFLite against float TensorFlow, of each output's largest magnitude: 8-bit products
# move logits by a few percent of it; a wrong or missing weight by about all of it.
QUANTIZED_SCALE_RTOL = 0.5
# Probes beyond the SavedModel's: the final-sigma branch of the uncased tokenizer, invalid UTF-8.
TFLITE_PROBES = PROBE_TEXTS + ("ΣΟΦΟΣ λόγος Σ.", b"bad \xff\xfe utf-8 \xc3(")


def text_widths(functions):
    """Texts per row of each input of serving_default: 1 for strings [B], K for [B, K] (SWAG's
    endings)."""
    return {
        spec.name: 1 if spec.shape.rank == 1 else int(spec.shape[1])
        for spec in functions["serving_default"].input_signature
    }


def probe_texts(functions):
    """The check's inputs by text input name: `TFLITE_PROBES` rotated by one per input (and per
    column of an input [B, K]), so that each pairs the probes with others."""
    probes, texts, offset = list(TFLITE_PROBES), {}, 0
    for name, k in text_widths(functions).items():
        columns = [probes[offset + j :] + probes[: offset + j] for j in range(k)]  # (K, N)
        texts[name] = (
            columns[0] if k == 1 else [list(row) for row in zip(*columns)]
        )  # (N,) or (N, K)
        offset += k
    return texts


def verify(flatbuffer, functions, probes, exact=True):
    """Runs each signature of `flatbuffer` on `probes`; raises AssertionError unless it answers as
    the tf.function it was converted from: `preprocess` (and every signature if `exact`) with
    outputs of equal shapes, equal ints and strings and floats within `FLOAT_ATOL` plus
    `checks.SCALE_RTOL` of the output's largest magnitude (infinities equal); the others of a
    quantized model as `_quantized_difference` says (their answers may differ, and with them the
    entities per row or the windows' answers)."""
    interpreter = load_interpreter(model_content=flatbuffer)
    for name, function in functions.items():
        same_values = exact or name == "preprocess"  # Text ops are never quantized.
        inputs = [probes[spec.name] for spec in function.input_signature]
        want = function(*[tf.constant(as_strings(x)) for x in inputs])
        got = interpreter.get_signature_runner(name)(
            **{spec.name: as_strings(x) for spec, x in zip(function.input_signature, inputs)}
        )
        for key, value in want.items():
            a, b = got[key], np.asarray(value)
            if same_values:
                problem = checks.difference(a, b, atol=FLOAT_ATOL)
            else:
                problem = _quantized_difference(a, b)
            if problem:
                raise AssertionError(
                    f"TFLite signature {name} output {key} differs from TensorFlow's on the probe "
                    f"texts: {problem}."
                )


def _quantized_difference(got, want):
    """Why a quantized model's output is not near TensorFlow's, or None: the same rows, no NaN,
    and float outputs of the same shape within `QUANTIZED_SCALE_RTOL` of the output's largest
    magnitude where both are finite (answers that depend on a ranking, such as entities per row or
    a window's best span, may differ)."""
    if got.shape[:1] != want.shape[:1]:
        return f"{got.shape[0]} rows where {want.shape[0]} were expected"
    if got.dtype.kind != "f":
        return None
    if np.isnan(got).any():
        return f"{int(np.isnan(got).sum())} NaN values"
    if got.shape != want.shape or want.dtype.kind != "f":
        return None
    both = np.isfinite(got) & np.isfinite(want)
    return checks.difference(
        np.where(both, got, 0.0), np.where(both, want, 0.0), 0.0, QUANTIZED_SCALE_RTOL
    )


def load_interpreter(model_path=None, model_content=None, num_threads=None):
    """A LiteRT interpreter with tensorflow-text's TFLite kernels registered.

    Args:
        model_path: str, a .tflite file (or model_content: its bytes).
        num_threads: int or None (LiteRT's default).

    Returns:
        `ai_edge_litert.interpreter.InterpreterWithCustomOps`; call
        `get_signature_runner("serving_default")(text=as_strings([...]))`.
    """
    import tensorflow_text as tf_text
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    return InterpreterWithCustomOps(
        custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
        model_path=model_path,
        model_content=model_content,
        num_threads=num_threads,
    )


def as_strings(texts):
    """Texts (str or bytes), a list or a nested list [B, K] -> the object array of bytes a TFLite
    string input takes."""
    texts = np.asarray(texts, dtype=object)
    flat = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts.flat]
    return np.array(flat + [None], dtype=object)[:-1].reshape(
        texts.shape
    )  # (None: never a nested array)
