"""What "int8" quantizes how, per kind of model (`Int8Recipe`, `INT8_RECIPES`), and how the
calibration texts' ranges combine for each calibrated quantization (`calibration_reduce`).

The measurements behind these choices are on the results page "TFLite and quantization"
(docs/results/data/tflite-int8-recipes.json).
"""

import collections

# int8: ops kept in float (by TFLite builtin name; ops not in the model are ignored).
INT8_FLOAT_OPS = (
    "ADD",
    "BATCH_MATMUL",
    "DIV",
    "GELU",
    "MEAN",
    "MUL",
    "NEG",
    "RSQRT",
    "SOFTMAX",
    "SQUARED_DIFFERENCE",
    "SUB",
    "TANH",
)
# int8 with `Int8Recipe.float_layout`: layout ops and the embedding lookups kept in float as well
# (in int8 they requantize what they move, a per-call matmul's float output or the embedding
# tables, onto one more 8-bit grid); the tables are then stored by `int8_tables`.
INT8_LAYOUT_OPS = ("EXPAND_DIMS", "GATHER", "RESHAPE", "STRIDED_SLICE", "TRANSPOSE")


# The matrix multiplies `matmul_sites` tells apart, by the Keras layers they compute.
LAYER_SITES = {
    "query_key_value": "qkv",
    "attention_output_dense": "attention_output",
    "intermediate_dense": "intermediate",
    "output_dense": "output",
    "head": "head",
}
SMOOTH_SITES = tuple(LAYER_SITES.values())


class Int8Recipe(
    collections.namedtuple(
        "Int8Recipe",
        ["per_call", "reduce", "smooth_alpha", "smooth_sites", "float_layout", "gptq", "tables"],
        defaults=(None, (), False, False, "int8"),
    )
):
    """How "int8" quantizes a kind of model: `per_call`, the Keras layers (of `LAYER_SITES`)
    whose FULLY_CONNECTED quantizes its activations per call (found from the graph,
    `matmul_sites`; the other matmuls are calibrated); `reduce`, how the calibration texts'
    ranges combine (`reduce_ranges`); `smooth_alpha` and `smooth_sites`, SmoothQuant's migration
    strength and the sites (of `SMOOTH_SITES`, per-call ones) whose inputs it scales (`smooth`;
    None: no smoothing); `float_layout`, `INT8_LAYOUT_OPS` in float and the embedding tables
    stored as `tables` says (of `TABLE_STORAGE`: "int8", a scale per row, `int8_tables`, or
    "float16", `float16_tables`); `gptq`, the per-call matmuls' int8 weights rounded by GPTQ
    (`gptq`, on the calibration texts' inputs) instead of to the nearest step."""


# int8: by kind ("default": every kind not named). Classification reads one pooled vector: the
# feed-forward output per call, mean ranges. SQuAD and NER read every token's logits, where
# calibrated int8 loses more: every matmul per call, on inputs smoothed by SmoothQuant; SQuAD's
# weights rounded by GPTQ (`keras_bert.export.weight_rounding.gptq`) and its embedding tables in
# float16. Each was chosen on training texts not calibrated on (docs/results/data/
# tflite-int8-recipes.json).
_EVERY_MATMUL_PER_CALL = Int8Recipe(tuple(LAYER_SITES), "minmax", 0.5, SMOOTH_SITES, True)
INT8_RECIPES = {
    "default": Int8Recipe(("output_dense",), "mean"),
    "span": _EVERY_MATMUL_PER_CALL._replace(gptq=True, tables="float16"),
    "token_classification": _EVERY_MATMUL_PER_CALL,
}


def recipe(kind):
    """The `Int8Recipe` of a kind of model."""
    return INT8_RECIPES.get(kind, INT8_RECIPES["default"])


def calibration_reduce(quantize_name, kind=None):
    """How `reduce_ranges` combines the calibration texts' ranges for a quantization: "int8"
    as `recipe(kind)`, "int16x8_integer_only" the overall min and max (16 bits hold the outlier
    channels without saturating them), "int8_integer_only" the mean."""
    if quantize_name == "int8":
        return recipe(kind).reduce
    return "minmax" if quantize_name == "int16x8_integer_only" else "mean"
