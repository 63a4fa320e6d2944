"""Export to TF Serving SavedModels, TF Hub-style pairs and TFLite (installed as keras_bert.export).

    python -m keras_bert.export --model_dir=runs/mrpc/model --export_dir=serving/mrpc \\
        [--version=N] [--format=saved_model|hub|tflite] [--quantize=...] [--seq_length=...]

>>> export_saved_model("runs/mrpc/model", "serving/mrpc")   # doctest: +SKIP
'serving/mrpc/1'
>>> export_hub("uncased_L-12_H-768_A-12", "hub/bert")       # doctest: +SKIP
'hub/bert/1'
>>> list_ops("serving/mrpc/1")["FastBertNormalize"].library  # doctest: +SKIP
'tensorflow-text'

Modules: `source` (what is exported: a fine-tuned model dir or a pre-trained encoder),
`text_inputs` (raw text -> encoder inputs in the graph, with length bucketing), `signatures`
(one builder per kind of task), `saved_model` (TF Serving versions), `hub` (the TF Hub pair),
`ops` (the op inventory and check), `versions` (atomic version directories), `rest` (TF
Serving REST bodies -> signature inputs), `warmup` (TF Serving's warmup requests), `batching`
(TF Serving's batching, measured), `tflite` (TFLite models), `quantization` (its calibrated
integer quantizations, and the modules it names by job).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import TypeAlias

from keras_bert import paths
from keras_bert._lazy import attach

# Calibration texts for quantize="int8" and "int8_integer_only": texts, or (text, text_b)
# pairs, or a file of them.
RepresentativeTexts: TypeAlias = (
    Sequence[str | bytes] | Sequence[Sequence[str | bytes]] | str | os.PathLike[str]
)

# The names load on first use (the command line's --help starts without TensorFlow).
_NAMES = {
    "export_hub": "keras_bert.export.hub:export_hub",
    "OpCheckError": "keras_bert.export.ops:OpCheckError",
    "check_ops": "keras_bert.export.ops:check_ops",
    "list_ops": "keras_bert.export.ops:list_ops",
    "export_saved_model": "keras_bert.export.saved_model:export_saved_model",
    "load_source": "keras_bert.export.source:load_source",
}
__getattr__, __dir__ = attach(__name__, _NAMES)

# format -> (its export function, what it writes (--help), whether it takes quantize and
# representative_texts).
FORMATS: dict[str, tuple[str, str, bool]] = {
    "saved_model": (
        "keras_bert.export.saved_model:export_saved_model",
        "TF Serving SavedModel",
        False,
    ),
    "hub": ("keras_bert.export.hub:export_hub", "TF Hub-style preprocessor/ + encoder/", False),
    "tflite": ("keras_bert.export.tflite:export_tflite", "TFLite model", True),
}
# quantize -> (converter settings in keras_bert.export.tflite, what it does (--help)).
QUANTIZATIONS: dict[str, tuple[str, str]] = {
    "none": ("_no_quantization", "float32"),
    "float16": ("_float16", "float16 weights"),
    "dynamic_range": ("_dynamic_range", "int8 weights, activations quantized per call"),
    "int8": (
        "_int8",
        "int8 weights and activations in every matrix multiply (calibrated on representative_texts;"
        " the feed-forward output's activations per call), the other ops float",
    ),
    "int8_integer_only": (
        "_int8_integer_only",
        "every op after the tokenizer integer (int8), calibrated on representative_texts; for "
        "integer-only accelerators",
    ),
    "int16x8_integer_only": (
        "_int16x8_integer_only",
        "every op after the tokenizer integer (int16 activations, int8 weights: TFLite's 16x8 "
        "mode), calibrated on representative_texts; for integer-only accelerators",
    ),
}


def export(
    model_dir: str | os.PathLike[str] | object,
    export_dir: str | os.PathLike[str],
    format: str = "saved_model",
    version: int | None = None,
    seq_length: int | None = None,
    quantize: str = "none",
    representative_texts: RepresentativeTexts | None = None,
    warmup_requests: bool = True,
    warmup_texts: RepresentativeTexts | None = None,
    tune_batching: bool = False,
    text_pair: bool | None = None,
) -> str:
    """Exports in one of `FORMATS`; returns the new version directory.

    `quantize` is one of `QUANTIZATIONS` for TFLite, "none" or "int8" for format="saved_model"
    (`keras_bert.export.int8_saved_model`); TFLite's int8 calibrates on
    `representative_texts` (see `keras_bert.export.tflite.export_tflite`). `warmup_requests`,
    `warmup_texts` and `tune_batching` are TF Serving's, for format="saved_model" (see
    `keras_bert.export.saved_model.export_saved_model`). `text_pair` (saved_model and tflite):
    a classifier's signatures take sentence pairs, for the Hugging Face directories that do not
    say (see `keras_bert.export.source.load_source`).

    Raises:
        ValueError: an unknown format or quantize, or quantize for a format without it, or
            warmup_texts or tune_batching for another format than saved_model, or text_pair
            for hub (its preprocessor packs one or two segments).
        FileNotFoundError: model_dir does not exist.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {tuple(FORMATS)}, got {format!r}.")
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {tuple(QUANTIZATIONS)}, got {quantize!r}.")
    function, _, quantizes = FORMATS[format]
    if not quantizes and quantize != "none" and format != "saved_model":
        raise ValueError(
            f"quantize applies to format='tflite' and 'saved_model' only, got format={format!r}."
        )
    if format != "saved_model" and (warmup_texts is not None or tune_batching):
        raise ValueError(
            f"warmup_texts and tune_batching are for format='saved_model', got format={format!r}."
        )
    if format == "hub" and text_pair is not None:
        raise ValueError(
            "text_pair is for format='saved_model' and 'tflite'; the hub preprocessor packs one "
            "or two segments as given."
        )
    if isinstance(model_dir, (str, os.PathLike)):
        paths.require_path(
            "model_dir",
            model_dir,
            "a fine-tuned model/ directory (model.keras, task.json, vocab.txt) "
            "or its run directory, a fine-tuned Hugging Face directory, or a pre-trained encoder: "
            "Google checkpoint, Hugging Face directory or run_pretraining model_dir",
        )
    module, name = function.split(":")
    extra: dict[str, object] = {}
    if quantizes:
        extra = dict(quantize=quantize, representative_texts=representative_texts)
    if format == "saved_model":
        extra = dict(
            warmup_requests=warmup_requests,
            warmup_texts=warmup_texts,
            tune_batching=tune_batching,
            quantize=quantize,
        )
    if format != "hub":
        extra["text_pair"] = text_pair
    return getattr(importlib.import_module(module), name)(
        model_dir, export_dir, version=version, seq_length=seq_length, **extra
    )


__all__ = [
    "FORMATS",
    "OpCheckError",
    "QUANTIZATIONS",
    "check_ops",
    "export",
    "export_hub",
    "export_saved_model",
    "list_ops",
    "load_source",
]
