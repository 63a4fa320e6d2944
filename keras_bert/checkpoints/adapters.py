"""LoRA adapters alone: `adapters.npz` (the LoRA weights and the task head's weights) and
`adapters.json` (rank, alpha, the task model's architecture, the weight names).

A fine-tuning run with `lora_rank` and `save_adapters` writes them beside `model.keras` in its
`model/` directory (`save_task_model`); they are kilobytes to megabytes where model.keras holds
the whole encoder. `load_adapters` puts them onto the base encoder again:

>>> model = load_adapters("uncased_L-12_H-768_A-12", "runs/sst2/model")  # doctest: +SKIP
"""

import io
import json
import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert.checkpoints import formats
from keras_bert.errors import CheckpointError
from keras_bert.io_utils import write_atomic
from keras_bert.models import lora

WEIGHTS_FILE = "adapters.npz"
INFO_FILE = "adapters.json"


def _adapter_weights(model: keras.Model) -> list[keras.Variable]:
    """The task model's weights that adapters hold: LoRA's and those outside the encoder."""
    encoder_ids = {id(v) for v in model.encoder.weights}
    return [v for v in model.weights if lora.is_lora(v) or id(v) not in encoder_ids]


def save_adapters(model: keras.Model, directory: str) -> str:
    """Writes `adapters.npz` and `adapters.json` of a task model with LoRA to `directory`.

    Args:
        model: a `keras_bert.models.task_models` model whose encoder has LoRA
            (`keras_bert.models.lora.enable_lora`).
        directory: str (local or gs://), existing.

    Returns:
        str, the path of adapters.npz.
    """
    layers = lora.lora_layers(model.encoder)
    if not layers or not layers[0].lora_enabled:
        raise ValueError("The model's encoder has no LoRA weights: enable_lora first.")
    weights = {v.path: keras.ops.convert_to_numpy(v) for v in _adapter_weights(model)}
    buffer = io.BytesIO()
    np.savez(buffer, **weights)
    path = os.path.join(directory, WEIGHTS_FILE)
    write_atomic(path, buffer.getvalue())
    info = {
        "lora_rank": int(layers[0].lora_rank),
        "lora_alpha": float(layers[0].lora_alpha),
        "weights": sorted(weights),
        "model": keras.saving.serialize_keras_object(model),
    }
    write_atomic(os.path.join(directory, INFO_FILE), json.dumps(info, indent=1))
    return path


def load_adapters(
    base: str | os.PathLike[str] | keras.Model, directory: str | os.PathLike[str]
) -> keras.Model:
    """The task model of the base encoder with the adapters of `directory` on it.

    Args:
        base: an init checkpoint (path, any format of `keras_bert.checkpoints.FORMATS`: its
            encoder is loaded and the task model rebuilt from adapters.json), or a task model whose
            encoder holds the base weights and has no LoRA yet (changed in place).
        directory: str, the directory of adapters.npz and adapters.json (a run's `model/`).

    Returns:
        The task model: base encoder + LoRA + trained head, the fine-tuned model's outputs.

    Raises:
        CheckpointError: an adapter weight the model lacks or it has of another shape, or a
            weight of its head or LoRA the adapters lack.
    """
    with tf.io.gfile.GFile(os.path.join(directory, INFO_FILE)) as f:
        info = json.load(f)
    with tf.io.gfile.GFile(os.path.join(directory, WEIGHTS_FILE), "rb") as f:
        arrays = dict(np.load(io.BytesIO(f.read())))
    if isinstance(base, str | os.PathLike):  # The model's class from Keras' registry.
        model = keras.saving.deserialize_keras_object(info["model"])
        encoder = formats.load(base, formats.builder(type(model.encoder)))
        model.encoder.set_weights(encoder.get_weights())
    else:
        model = base
    lora.enable_lora(model.encoder, info["lora_rank"], info["lora_alpha"])
    targets = {v.path: v for v in _adapter_weights(model)}
    missing, unset = sorted(set(arrays) - set(targets)), sorted(set(targets) - set(arrays))
    if missing or unset:
        raise CheckpointError(
            f"{directory}: the model lacks the adapter weights {missing}, the adapters lack "
            f"its weights {unset}."
        )
    for name, value in arrays.items():
        if tuple(targets[name].shape) != value.shape:
            raise CheckpointError(
                f"{directory}: {name} has shape {value.shape}, the model's "
                f"{tuple(targets[name].shape)}."
            )
        targets[name].assign(value)
    return model
