"""Our models' variables under canonical names, and checked copies to and from other formats.

The canonical name of a variable is its Keras path in `BertEncoder` / `BertPretrainer`
(`embeddings/word_embeddings`, `layer_3/query/kernel`, `cls_predictions/output_bias`, ...).
Each checkpoint format has one table of `(canonical, external, transpose)` rows, where
`external` is the name in that format ("{i}" stands for the layer index) and `transpose`
says the stored array is the transpose of our Keras kernel.
"""

import re
import warnings

import numpy as np

from keras_bert.errors import CheckpointError

# Optimizer state and step counters found in training checkpoints; never model weights.
_OPTIMIZER_RE = re.compile(
    r"(^|/)(adam_m|adam_v|Adam|Adam_1|Momentum|AdamWeightDecay\w*)$|^global_step$"
)


def rows(ours, theirs, leaves):
    """Table rows for one sub-layer: `leaves` are (our leaf, their leaf, transpose)."""
    return tuple((f"{ours}/{a}", f"{theirs}{b}", t) for a, b, t in leaves)


def warn_unused(names, used, ignored, source):
    """Warns (does not fail) about file variables that no model weight took.

    Optimizer state and the names for which `ignored(name)` is true are left out.
    """
    unused = sorted(
        n for n in names if n not in used and not is_optimizer_state(n) and not ignored(n)
    )
    if unused:
        warnings.warn(
            f"{source}: {len(unused)} variables not used by the model: {_listing(unused)}.",
            stacklevel=3,
        )
    return unused


def split_model(model):
    """(encoder, pretrainer or None) for a `BertEncoder` or `BertPretrainer`, told apart by their
    layers (a pre-trainer has a masked-LM head on its encoder)."""
    if hasattr(model, "masked_lm_head") and hasattr(model, "encoder"):
        return model.encoder, model
    if hasattr(model, "transformer_layers") and hasattr(model, "embeddings"):
        return model, None
    raise TypeError(f"Expected a BertEncoder or BertPretrainer, got {type(model).__name__}.")


def model_variables(model):
    """Dict canonical name -> Keras variable, for every weight of the model."""
    encoder, pretrainer = split_model(model)
    emb = encoder.embeddings
    out = {
        "embeddings/word_embeddings": emb.word_embeddings,
        "embeddings/token_type_embeddings": emb.token_type_embeddings,
        "embeddings/position_embeddings": emb.position_embeddings,
    }
    _add_norm(out, "embeddings/LayerNorm", emb.layer_norm)
    for i, block in enumerate(encoder.transformer_layers):
        for name, dense in (
            ("query", block.query),
            ("key", block.key),
            ("value", block.value),
            ("attention_output_dense", block.attention_output),
            ("intermediate_dense", block.intermediate),
            ("output_dense", block.output_dense),
        ):
            _add_dense(out, f"layer_{i}/{name}", dense)
        _add_norm(out, f"layer_{i}/attention_output_LayerNorm", block.attention_layer_norm)
        _add_norm(out, f"layer_{i}/output_LayerNorm", block.output_layer_norm)
    _add_dense(out, "pooler_dense", encoder.pooler)
    if pretrainer is not None:
        head = pretrainer.masked_lm_head
        _add_dense(out, "cls_predictions/transform_dense", head.transform)
        _add_norm(out, "cls_predictions/transform_LayerNorm", head.layer_norm)
        out["cls_predictions/output_bias"] = head.output_bias
        if pretrainer.next_sentence_head is not None:
            _add_dense(out, "cls_seq_relationship", pretrainer.next_sentence_head)
    return out


def _add_dense(out, prefix, layer):
    out[f"{prefix}/kernel"] = layer.kernel
    out[f"{prefix}/bias"] = layer.bias


def _add_norm(out, prefix, layer):
    out[f"{prefix}/gamma"] = layer.gamma
    out[f"{prefix}/beta"] = layer.beta


def expand(table, model):
    """The table's rows for this model: layer templates expanded, rows for absent heads dropped.

    Returns:
        list of (canonical, external, transpose, variable).
    """
    variables = model_variables(model)
    layers = len(split_model(model)[0].transformer_layers)
    rows = []
    for canonical, external, transpose in table:
        indices = range(layers) if "{i}" in canonical else [None]
        for i in indices:
            name = canonical.format(i=i) if i is not None else canonical
            if name in variables:
                rows.append(
                    (
                        name,
                        external.format(i=i) if i is not None else external,
                        transpose,
                        variables[name],
                    )
                )
    unmapped = sorted(set(variables) - {row[0] for row in rows})
    if unmapped:  # A table out of step with the model is a bug here, not a user error.
        raise AssertionError(f"No checkpoint name for model variables {unmapped}.")
    return rows


def export_arrays(table, model):
    """Dict external name -> float32 NumPy array, in the format's layout."""
    arrays = {}
    for _, external, transpose, variable in expand(table, model):
        value = np.asarray(variable.numpy(), dtype=np.float32)
        arrays[external] = np.ascontiguousarray(value.T if transpose else value)
    return arrays


def assign_arrays(table, model, lookup, source, hint="", optional=()):
    """Copies arrays from a checkpoint into the model, after checking all of them.

    Args:
        table: the format's rows.
        model: `BertEncoder` or `BertPretrainer`.
        lookup: callable external name -> NumPy array, or None when absent.
        source: str naming the file, for error messages.
        hint: str appended to a missing-variables error.
        optional: external names that may be absent: they keep their initial
            values, with a warning.

    Returns:
        set of external names used.

    Raises:
        CheckpointError: naming every missing variable and every shape mismatch
            (expected vs found, in the file's layout); nothing is assigned then.
    """
    missing, mismatched, pending, left = [], [], [], []
    for _, external, transpose, variable in expand(table, model):
        array = lookup(external)
        if array is None:
            (left if external in optional else missing).append(external)
            continue
        expected = tuple(variable.shape)[::-1] if transpose else tuple(variable.shape)
        if tuple(array.shape) != expected:
            mismatched.append(
                f"{external}: expected shape {list(expected)}, found {list(array.shape)}"
            )
            continue
        pending.append((variable, array.T if transpose else array))
    problems = []
    if missing:
        problems.append(f"missing variables {_listing(missing)}{hint}")
    if mismatched:
        problems.append(f"shape mismatches: {_listing(mismatched)}")
    if problems:
        raise CheckpointError(f"{source}: " + "; ".join(problems))
    if left:
        warnings.warn(
            f"{source}: no {_listing(left)}; these keep their random initial values.", stacklevel=3
        )
    for variable, array in pending:
        variable.assign(np.asarray(array, dtype=variable.dtype))
    return {row[1] for row in expand(table, model)} - set(left)


def is_optimizer_state(name):
    """True for optimizer slots and step counters (adam_m, adam_v, global_step, ...)."""
    return bool(_OPTIMIZER_RE.search(name))


def _listing(names, limit=8):
    shown = ", ".join(names[:limit])
    return shown + (f" (and {len(names) - limit} more)" if len(names) > limit else "")
