"""An encoder's weights in keras-hub's `BertBackbone` (the parity tests' reference and the
benchmarks' peer): our attention kernels in the per-head layout, our weight paths renamed by a
table, every variable of the target assigned.

keras-hub itself is not imported here: the caller builds the backbone with the encoder's sizes.

    backbone = keras_hub.models.BertBackbone(vocabulary_size=..., ...)
    copy_to_keras_hub(encoder, backbone)
    backbone(keras_hub_inputs(inputs))["sequence_output"]  # == encoder(inputs)["sequence_output"]
"""

import re

# Our weight path prefix -> keras-hub's ("{i}" = the layer number).
HUB_NAMES = {
    "embeddings/word_embeddings": "token_embedding/embeddings",
    "embeddings/position_embeddings": "position_embedding/embeddings",
    "embeddings/token_type_embeddings": "segment_embedding/embeddings",
    "embeddings/LayerNorm": "embeddings_layer_norm",
    "layer_{i}/query": "transformer_layer_{i}/self_attention_layer/query",
    "layer_{i}/key": "transformer_layer_{i}/self_attention_layer/key",
    "layer_{i}/value": "transformer_layer_{i}/self_attention_layer/value",
    "layer_{i}/attention_output_dense": (
        "transformer_layer_{i}/self_attention_layer/attention_output"
    ),
    "layer_{i}/attention_output_LayerNorm": "transformer_layer_{i}/self_attention_layer_norm",
    "layer_{i}/intermediate_dense": "transformer_layer_{i}/feedforward_intermediate_dense",
    "layer_{i}/output_dense": "transformer_layer_{i}/feedforward_output_dense",
    "layer_{i}/output_LayerNorm": "transformer_layer_{i}/feedforward_layer_norm",
    "pooler_dense": "pooled_dense",
}


def per_head_arrays(encoder):
    """Our weights by Keras path, with attention kernels in the per-head layout of keras-hub and
    tf-models-official ([H, N, D], [N, D], [N, D, H])."""
    config = encoder.config
    H, N, D = config.hidden_size, config.num_attention_heads, config.head_size
    arrays = {}
    for w in encoder.weights:
        value = w.numpy()
        if any(f"/{p}/" in w.path for p in ("query", "key", "value")):
            value = value.reshape((H, N, D) if w.path.endswith("kernel") else (N, D))  # (H, N, D)
        elif w.path.endswith("attention_output_dense/kernel"):
            value = value.reshape(N, D, H)  # (N, D, H)
        arrays[w.path] = value
    return arrays


def rename(path, names):
    """Our path -> the reference's, by the first `names` entry (our prefix -> theirs, "{i}" =
    layer).

    Raises:
        KeyError: no entry matches.
    """
    for ours, theirs in names.items():
        match = re.match("^" + re.escape(ours).replace(r"\{i\}", r"(?P<i>\d+)") + "(?=/|$)", path)
        if match:
            return theirs.format(**match.groupdict()) + path[match.end() :]
    raise KeyError(path)


def copy_weights(arrays, target_variables, names):
    """Assigns `arrays` (our paths) to `target_variables` (dict name -> variable), every one of
    them.

    Raises:
        ValueError: the renamed arrays and the variables differ in names or in a shape.
    """
    renamed = {rename(path, names): value for path, value in arrays.items()}
    if sorted(renamed) != sorted(target_variables):
        raise ValueError(
            f"names differ: only ours {sorted(set(renamed) - set(target_variables))}, only "
            f"theirs {sorted(set(target_variables) - set(renamed))}"
        )
    for name, variable in target_variables.items():
        if tuple(variable.shape) != renamed[name].shape:
            raise ValueError(f"{name}: shape {tuple(variable.shape)} != {renamed[name].shape}")
        variable.assign(renamed[name])


def copy_to_keras_hub(encoder, backbone, exact_gelu=None):
    """Copies `encoder`'s weights into a keras-hub `BertBackbone` of the same sizes.

    Args:
        encoder: `keras_bert.BertEncoder`.
        backbone: `keras_hub.models.BertBackbone`.
        exact_gelu: bool or None. Give the backbone's feed-forward the exact (erf) GELU (keras-hub
            ships the tanh approximation; the paper and our "gelu" use erf). None: when the
            encoder's `hidden_act` is "gelu".

    Returns:
        The backbone.
    """
    import keras

    if exact_gelu is None:
        exact_gelu = encoder.config.hidden_act == "gelu"
    if exact_gelu:
        for layer in backbone.transformer_layers:
            layer._feedforward_intermediate_dense.activation = keras.activations.gelu
    copy_weights(per_head_arrays(encoder), {w.path: w for w in backbone.weights}, HUB_NAMES)
    return backbone


def keras_hub_inputs(inputs):
    """Our encoder input dict -> keras-hub's names (token_ids, segment_ids, padding_mask)."""
    return {
        "token_ids": inputs["input_word_ids"],
        "segment_ids": inputs["input_type_ids"],
        "padding_mask": inputs["input_mask"],
    }
