"""TFLite models with the tokenizer inside: raw text in, the task's answer out, no Flex ops.

>>> export_tflite("runs/sst2/model", "mobile/sst2", quantize="dynamic_range")   # doctest: +SKIP
'mobile/sst2/1'

`<export_dir>/<version>/` holds
- `model.tflite`: the signatures of `keras_bert.export.signatures` that take text, converted
  from the same tf.functions as the SavedModel's, with the same answers:
  `serving_default`, raw strings -> the task's answer (string outputs are TFLite string tensors):
  - classification (`text` [B], and `text_b` for pairs): `label` [B], `label_id` int32 [B],
    `probabilities` float32 [B, C]; regression: `score` [B]; encoder: `pooled_output` [B, H],
    `sequence_output` [B, S, H], `input_mask` [B, S];
  - NER (`text` [B]): `entity_text`, `entity_type` string [B, E], `start_char`, `end_char`
    int32 [B, E] (code point offsets; "" and -1 pad), `entity_count` int32 [B];
  - SWAG (`context` [B], `endings` [B, 4]): `choice` int32 [B], `probabilities` [B, 4];
  - SQuAD (`question`, `context` [B]): `answer` string [B], `start_char`, `end_char` int32 [B],
    `score` float32 [B] (-inf without an answer), `has_answer` bool [B], and for v2.0
    `null_odds` float32 [B]; contexts longer than one window are windowed with the doc stride
    inside the graph, however long;
  and `preprocess` (the same strings -> `input_word_ids`, `input_mask`, `input_type_ids` int32
  [B, S], SWAG [B, 4, S], SQuAD [W, S] and `example_index` [W]: the tokenizer and packer alone).
  Any batch size of 1 or more; each batch runs the encoder on its longest row only (resize the
  input, or let the signature runner do it). An empty batch runs, but LiteRT's Python wrapper
  raises "Invalid tensor size" when reading an output of zero bytes (`preprocess`, the encoder):
  skip empty calls. `task.json` below is also in the flatbuffer's metadata under
  `METADATA_NAME`. The answers are those of the SavedModel (`keras_bert.export.entities`,
  `keras_bert.export.spans`: written with ops that convert, no numeric stand-ins).
- `task.json` (the task's facts, the quantization, the signatures and the ops), `vocab.txt`,
  and for classifiers `labels.txt` (one label per line, in `label_id` order).

Ops: TFLite builtins and tensorflow-text's TFLite custom ops for the tokenizer, and for NER and
SQuAD `TFText>ByteSplitWithOffsets` (byte values, for code point offsets) and
`TFText>ByteSplitByOffsets` (the answer substrings) (see `list_tflite_ops`), never Flex
(SELECT_TF_OPS): the model runs in any LiteRT build that links tensorflow-text's kernels.
In Python, `load_interpreter` registers them (`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`
with LiteRT's `InterpreterWithCustomOps`); in C++, `tflite::ops::custom::AddTFTextOps` from
tensorflow-text's `tflite_registrar`.

Quantizations (`QUANTIZERS`): "none" (float32), "float16" (float16 weights: half the size,
the same answers within about 1e-3), "dynamic_range" (int8 weights, activations quantized per
call: a quarter of the size and several times faster on CPUs, probabilities within a few
hundredths; answers that are near-ties in float32 may flip, e.g. an NER tag or a SQuAD span),
and two calibrated on `representative_texts` (default: the training texts the fine-tuning run
recorded in `model/`), see `keras_bert.export.quantization`: "int8" (int8 weights and
activations in every FULLY_CONNECTED, the feed-forward output's activations quantized per call,
for SQuAD and NER every matmul's, on SmoothQuant-scaled inputs; the other ops and the answer
float: as fast as dynamic range,
the same classification labels on real dev sets, bench/bench_tflite_tasks.py for SQuAD and NER)
"int8_integer_only" (every op after the tokenizer integer, asserted: what integer-only
accelerators run; loses labels on BERT-sized activations, bench/bench_tflite.py; refused for
SQuAD) and "int16x8_integer_only" (the same with int16 activations, int8 weights). Their
task.json (and metadata) lists under `quantization` the matrix multiplies' tensor types and the
ops left in float. The text ops are integer and string ops, never quantized: token ids are
exact in every quantization.

Before the version appears the flatbuffer is checked: every op must be a builtin or a
tensorflow-text kernel (`check_tflite_ops`), and run by the interpreter on probe texts
(empty, accents, CJK, emoji, a capital sigma, invalid UTF-8, over-long), `preprocess` must
give exactly the ids of the TensorFlow function and `serving_default` the same answers
(float32: equal strings and ints, floats within `FLOAT_ATOL` plus 1e-4 of each output's largest
magnitude; quantized: the same batch size, no NaN, floats of the same shape within
`QUANTIZED_SCALE_RTOL` of that magnitude). A failure says by how much and where. A failed check
leaves no version directory.

Every kind of `keras_bert.export.signatures.BUILDERS` converts (`KINDS`).
"""

import dataclasses
import itertools
import json
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from keras_bert.export import (
    QUANTIZATIONS,
    RepresentativeTexts,
    integer_check,
    ops,
    quantization,
    quantization_report,
    versions,
)
from keras_bert.export.signatures import BUILDERS, build_signatures
from keras_bert.export.source import load_source
from keras_bert.export.tflite_runtime import (  # noqa: F401 (the interpreter side, re-exported)
    FLOAT_ATOL,
    QUANTIZED_SCALE_RTOL,
    TFLITE_PROBES,
    as_strings,
    load_interpreter,
    probe_texts,
    text_widths,
    verify,
)
from keras_bert.inputs import INPUT_NAMES
from keras_bert.rewrites import channel_groups, integer
from keras_bert.rewrites import encoder as rewrite

MODEL_FILE = "model.tflite"
LABELS_FILE = "labels.txt"
METADATA_NAME = "keras_bert.task.json"
# Kinds that convert (task.json `problem`, or "encoder"): every kind with serving signatures.
KINDS = tuple(BUILDERS)
REPRESENTATIVE_LIMIT = 300  # Calibration texts used for "int8" and "int8_integer_only".
CONVERTER_CALIBRATION = 8  # Of them, run by the converter's own calibration (see `convert`).
# Calibration texts: texts, rows of texts (one per serving_default input), or a file of rows.
_BUILTIN_NAMES = {
    code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")
}


class TFLiteOpError(ops.OpCheckError):
    """A TFLite model holds an op that neither the builtins nor tensorflow-text's kernels run."""


def _no_quantization(converter, representative):
    del converter, representative


def _float16(converter, representative):
    del representative
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]


def _dynamic_range(converter, representative):
    del representative
    converter.optimizations = [tf.lite.Optimize.DEFAULT]


def _int8(converter, representative):
    """Calibration only: `keras_bert.export.quantization` quantizes the calibrated model."""
    import tensorflow_text as tf_text

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.experimental_mlir_quantizer = True
    converter._experimental_calibrate_only = True
    # The calibrator runs the whole model, tokenizer included: it needs the text kernels.
    converter.target_spec._experimental_custom_op_registerers = list(
        tf_text.tflite_registrar.SELECT_TFTEXT_OPS
    )


# The same calibration; they differ in what is quantized.
_int8_integer_only = _int16x8_integer_only = _int8
CALIBRATED = ("int8", *quantization.INTEGER_ONLY)


# quantize -> converter settings, by the names of keras_bert.export.QUANTIZATIONS (the one table).
QUANTIZERS = {name: globals()[function] for name, (function, _) in QUANTIZATIONS.items()}


def export_tflite(
    model_dir: str | os.PathLike[str] | keras.Model,
    export_dir: str | os.PathLike[str],
    version: int | None = None,
    seq_length: int | None = None,
    quantize: str = "none",
    representative_texts: RepresentativeTexts | None = None,
    text_pair: bool | None = None,
) -> str:
    """Exports a fine-tuned task model (or a pre-trained encoder) as a TFLite model with its
    tokenizer.

    Args:
        model_dir: a task model in memory with its preprocessor (`from_preset`), or str:
            The `model/` directory of a fine-tuning run (or the run directory),
            or a pre-trained encoder (see `keras_bert.export.source.load_source`).
        export_dir: str. Base directory; versions are its integer subdirectories.
        version: int or None (the next version).
        seq_length: int or None. Longest packed sequence (default: the training length).
        quantize: str, one of `QUANTIZERS`.
        representative_texts: for "int8" and "int8_integer_only" (ignored otherwise): a list
            of texts (str or bytes) or of rows of texts in the order of serving_default's inputs
            ((text, text_b) for pairs, (question, context) for SQuAD, (context, ending x 4)
            for SWAG), or a file with one row per line (texts tab-separated), e.g. the
            training texts. The first `REPRESENTATIVE_LIMIT` calibrate the activations.
            Default: the training texts recorded in `model/` by the fine-tuning run.
        text_pair: bool or None. A classifier reads sentence pairs (see
            `keras_bert.export.source.load_source`).

    Returns:
        str, the new version directory.

    Raises:
        ValueError: a kind not in `KINDS`, an unknown quantize, integer quantization without
            texts (none given or recorded) or with rows of the wrong number of texts.
        IntegerOnlyError: "int8_integer_only" or "int16x8_integer_only" left an op in float
            (naming it).
        FileExistsError: the version exists (it is never overwritten).
        TFLiteOpError: an op without a builtin or tensorflow-text kernel (naming it).
    """
    source = load_source(model_dir, seq_length=seq_length, mlm=False, text_pair=text_pair)
    return write_tflite(
        source,
        export_dir,
        version=version,
        quantize=quantize,
        representative_texts=representative_texts,
    )


def write_tflite(
    source, export_dir, version=None, quantize="none", representative_texts=None, functions=None
):
    """Converts an `ExportSource` and writes it as a new checked version; returns its path.
    `functions`: its `text_functions`, when already built (several quantizations trace once;
    the integer-only ones always trace their own, through `integer_source`'s copy of the model)."""
    if quantize in CALIBRATED:
        quantization.check_kind(source, quantize)
        if representative_texts is None:
            representative_texts = quantization.default_texts(source)
    if quantize not in quantization.INTEGER_ONLY:
        return _write_tflite(source, export_dir, version, quantize, representative_texts, functions)
    groups = None
    if quantize == "int8_integer_only":
        groups = calibrate_groups(source, functions or text_functions(source), representative_texts)
    copy = integer_source(source, quantization.INTEGER_ONLY[quantize], groups)
    return _write_tflite(copy, export_dir, version, quantize, representative_texts, None, groups)


def integer_source(source, activations, groups=None):
    """`source` with its model (or encoder) replaced by the export-time copy that integer-only
    TFLite traces (sharing the weights): `keras_bert.rewrites.integer.IntegerEncoder` for
    `activations` ("int8" or "int16"), or with channel `groups` the
    `keras_bert.rewrites.channel_groups.GroupedEncoder`."""
    if groups is not None:
        make, kwargs = channel_groups.GroupedEncoder, {"groups": groups}
    else:
        make, kwargs = integer.IntegerEncoder, {"activations": activations}
    model = source.model if source.model is not None else source.encoder
    copy = rewrite.substitute_encoder(model, make, **kwargs)
    if source.model is not None:
        return dataclasses.replace(source, model=copy)
    return dataclasses.replace(source, encoder=copy)


def calibrate_groups(source, functions, representative_texts):
    """The `keras_bert.rewrites.channel_groups.ChannelGroups` of `int8_integer_only`: chosen from
    the float encoder on the calibration texts (tokenized by the float `preprocess`), one at a
    time."""
    samples = representative_dataset(functions, representative_texts)
    preprocess, inputs = functions["preprocess"], []
    for _, texts in samples():
        ids = preprocess(*(texts[spec.name] for spec in preprocess.input_signature))
        width = ids["input_word_ids"].shape[-1]
        inputs.append({name: tf.reshape(ids[name], [-1, width]) for name in INPUT_NAMES})
    return channel_groups.calibrate(source.encoder, inputs)


def _write_tflite(
    source, export_dir, version, quantize, representative_texts, functions, groups=None
):
    functions = functions or text_functions(source)
    flatbuffer = convert(source, functions, quantize, representative_texts)
    found = check_tflite_ops(flatbuffer)
    if quantize in quantization.INTEGER_ONLY:
        integer_check.check_integer_only(flatbuffer, quantize)
    verify(flatbuffer, functions, probe_texts(functions), exact=quantize == "none")
    info = task_info(source, functions, quantize, found)
    if quantize in CALIBRATED:
        info["quantization"] = quantization_report.summary(flatbuffer, quantize, source.kind)
        if groups is not None:
            info["quantization"]["channel_groups"] = groups.sizes
        info["quantization"]["calibration_texts"] = min(
            len(load_texts(representative_texts)), REPRESENTATIVE_LIMIT
        )
        logging.info(
            "quantize=%r:\n%s", quantize, quantization_report.describe(info["quantization"])
        )
    with versions.new_version(export_dir, version) as (tmp, final):
        with tf.io.gfile.GFile(os.path.join(tmp, MODEL_FILE), "wb") as f:
            f.write(with_metadata(flatbuffer, {METADATA_NAME: json.dumps(info, indent=1).encode()}))
        files = {
            "task.json": json.dumps(info, indent=1),
            "vocab.txt": _lines(source.tokenizer.vocabulary),
        }
        if source.kind == "classification":
            files[LABELS_FILE] = _lines(str(label) for label in source.info["labels"])
        for name, text in files.items():
            with tf.io.gfile.GFile(os.path.join(tmp, name), "w") as f:
                f.write(text)
    return final


def text_functions(source):
    """The serving signatures of `source` that take only text (serving_default, preprocess).

    Raises:
        ValueError: the source's kind is not in `KINDS`.
    """
    if source.kind not in KINDS:
        raise ValueError(
            f"TFLite export of {source.kind!r} models ({source.path}) is not supported yet; kinds: "
            f"{', '.join(KINDS)}. Export it with format='saved_model'."
        )
    return {
        name: function
        for name, function in build_signatures(source).items()
        if all(spec.dtype == tf.string for spec in tf.nest.flatten(function.input_signature))
    }


def convert(source, functions, quantize="none", representative_texts=None):
    """The TFLite flatbuffer (bytes) of tf.functions with input signatures, one signature each.

    Variables are frozen into constants first (the converter would otherwise keep them as
    uninitialized resource variables); ops without a builtin become custom ops, checked by
    `check_tflite_ops`.
    """
    if quantize not in QUANTIZERS:
        raise ValueError(f"quantize must be one of {tuple(QUANTIZERS)}, got {quantize!r}.")
    if quantize in CALIBRATED:
        samples = representative_dataset(functions, representative_texts)
        return quantization.quantize_calibrated(
            calibrate(functions, samples), samples(), quantize, source.kind
        )
    converter = _converter(functions)
    QUANTIZERS[quantize](converter, None)
    return converter.convert()


def calibrate(functions, samples):
    """The float flatbuffer of `functions` with the converter's calibration statistics (the
    places `keras_bert.export.calibration` measures: the converter's calibration run on a few of
    `samples`, a `representative_dataset`, gives them; its ranges vary from run to run)."""
    converter = _converter(functions)
    _int8(converter, lambda: itertools.islice(samples(), CONVERTER_CALIBRATION))
    return converter.convert()


def _converter(functions):
    """A TFLite converter of the functions, frozen: builtins and custom (text) ops, no Flex."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [_frozen(name, function) for name, function in functions.items()], tf.Module()
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS
    ]  # No Flex (SELECT_TF_OPS).
    converter.allow_custom_ops = True  # The tokenizer's tensorflow-text ops.
    return converter


def _frozen(name, function):
    """A concrete function named `name` computing `function` with its variables as constants."""
    concrete = function.get_concrete_function()
    frozen = convert_variables_to_constants_v2(
        concrete, lower_control_flow=False
    )  # TFLite takes tf.cond as IF.
    structure = concrete.structured_outputs

    def call(*args):
        return tf.nest.pack_sequence_as(structure, frozen(*tf.nest.flatten(args)))

    call.__name__ = name  # The converter names each signature after its function's graph.
    return tf.function(
        call, input_signature=function.input_signature, autograph=False
    ).get_concrete_function()


def representative_dataset(functions, texts):
    """The int8 calibration data: a callable yielding ("serving_default", {input: strings [1] or
    [1, K]})."""
    rows = [
        tuple(row) if isinstance(row, (tuple, list)) else (row,)
        for row in load_texts(texts)[:REPRESENTATIVE_LIMIT]
    ]
    widths = text_widths(functions)
    wrong = [i for i, row in enumerate(rows) if len(row) != sum(widths.values())]
    if not rows or wrong:
        raise ValueError(
            f"representative_texts must hold rows of {sum(widths.values())} text(s): "
            + ", ".join(f"{name} ({k} texts)" if k > 1 else name for name, k in widths.items())
            + (
                f"; row {wrong[0]} has {len(rows[wrong[0]])}: {rows[wrong[0]]!r:.200}"
                if wrong
                else "; got none"
            )
            + "."
        )

    def generate():
        for row in rows:
            inputs, start = {}, 0
            for spec in functions["serving_default"].input_signature:
                k = widths[spec.name]
                inputs[spec.name] = as_strings(
                    [row[start] if spec.shape.rank == 1 else row[start : start + k]]
                )
                start += k
            yield "serving_default", inputs

    return generate


def load_texts(texts):
    """Calibration texts as a list: the rows of a file (one per line, texts tab-separated), or
    the given list."""
    if texts is None:
        raise ValueError(
            "Integer quantization calibrates the activations on representative_texts (e.g. the "
            "training texts): pass a list of texts or a file with one text per line (columns "
            "tab-separated)."
        )
    if isinstance(texts, (str, os.PathLike)):
        with tf.io.gfile.GFile(os.fspath(texts)) as f:
            return [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return list(texts)


def list_tflite_ops(flatbuffer):
    """Every op of a TFLite flatbuffer (all subgraphs) and who runs it.

    Returns:
        dict op name -> "builtin", "tensorflow-text" (a custom op tensorflow-text registers),
        "flex" (a TensorFlow op run by the Flex delegate) or "unknown" (another custom op,
        e.g. a TensorFlow op the converter could not lower), sorted by name.
    """
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    found = {}
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(
            code.BuiltinCode(), code.DeprecatedBuiltinCode()
        )  # Codes over 127 live in the first.
        if builtin != schema.BuiltinOperator.CUSTOM:
            found[_BUILTIN_NAMES[builtin]] = "builtin"
            continue
        name = code.CustomCode().decode()
        if name.startswith("Flex"):
            found[name] = "flex"
        else:
            found[name] = (
                "tensorflow-text" if ops.library_of(name) == "tensorflow-text" else "unknown"
            )
    return dict(sorted(found.items()))


def check_tflite_ops(flatbuffer):
    """Raises `TFLiteOpError` unless every op is a builtin or a tensorflow-text custom op;
    returns `list_tflite_ops(flatbuffer)` otherwise."""
    found = list_tflite_ops(flatbuffer)
    bad = {
        name: library
        for name, library in found.items()
        if library not in ("builtin", "tensorflow-text")
    }
    if bad:
        raise TFLiteOpError(
            "The TFLite model needs ops that neither TFLite's builtins nor tensorflow-text's "
            "kernels run: "
            + ", ".join(f"{name} ({library})" for name, library in bad.items())
            + ". A TensorFlow op's name (e.g. StridedSlice) means the converter could not lower it "
            "to a builtin for its shapes; write the model with ops that have TFLite builtins."
        )
    return found


def task_info(source, functions, quantize, found):
    """task.json of the export: the task's facts, the quantization, signatures and ops."""
    signatures = {
        name: {
            "inputs": [s.name for s in f.input_signature],
            "outputs": sorted(f.get_concrete_function().structured_outputs),
        }
        for name, f in functions.items()
    }
    return dict(
        source.info,
        seq_length=source.seq_length,
        kind=source.kind,
        format="tflite",
        model_file=MODEL_FILE,
        quantize=quantize,
        signatures=signatures,
        tflite_builtin_ops=[n for n, library in found.items() if library == "builtin"],
        tflite_custom_ops=[n for n, library in found.items() if library != "builtin"],
        tensorflow_version=tf.__version__,
    )


def with_metadata(flatbuffer, entries):
    """The flatbuffer with metadata entries (name -> bytes) added (read them with
    `read_metadata`)."""
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    for name, data in entries.items():
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(data, np.uint8)
        model.buffers.append(buffer)
        metadata = schema.MetadataT()
        metadata.name, metadata.buffer = name, len(model.buffers) - 1
        model.metadata = (model.metadata or []) + [metadata]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def read_metadata(flatbuffer):
    """The metadata entries of a flatbuffer: name -> bytes."""
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    entries = {}
    for i in range(model.MetadataLength()):
        metadata = model.Metadata(i)
        entries[metadata.Name().decode()] = model.Buffers(metadata.Buffer()).DataAsNumpy().tobytes()
    return entries


def _lines(items):
    return "".join(f"{item}\n" for item in items)
