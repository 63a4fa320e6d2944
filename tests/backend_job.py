"""Runs keras_bert models on one Keras backend in its own process, for tests/test_backends.py.

Usage: KERAS_BACKEND=<jax|torch|tensorflow> python backend_job.py <work dir>

The work dir holds what the test process (TensorFlow) wrote: `<name>.keras` models and
`inputs.npz`; optionally `minilm.json` ({"dir": a Hugging Face BERT directory}) and
`minilm_ids.npz`.
This job loads each model with `keras.saving.load_model`, runs it in inference mode, trains a
copy of the classifier for two steps, quantizes another with Keras' own `quantize("int8")`, and
writes everything to `<work dir>/<backend>.npz`.
"""

import json
import os
import sys

import keras
import numpy as np

import keras_bert  # noqa: F401 (registers the serializable classes on first use)
from keras_bert import checkpoints
from keras_bert.models import encoder, pretrainer, task_models  # noqa: F401

MODELS = (
    "encoder",
    "pretrainer",
    "classifier",
    "mean_classifier",
    "span_labeler",
    "token_classifier",
    "choices",
)


def flat_outputs(name, outputs):
    """{name/key: numpy} of a model's output dict (lists as name/key/i)."""
    flat = {}
    for key, value in outputs.items():
        values = value if isinstance(value, list | tuple) else [value]
        for i, v in enumerate(values):
            suffix = f"/{i}" if isinstance(value, list | tuple) else ""
            flat[f"{name}/{key}{suffix}"] = keras.ops.convert_to_numpy(v)
    return flat


def main(work):
    backend = keras.config.backend()
    data = dict(np.load(os.path.join(work, "inputs.npz")))
    inputs = {k: data[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    results = {}
    for name in MODELS:
        model = keras.saving.load_model(os.path.join(work, f"{name}.keras"))
        x = dict(inputs)
        if name == "pretrainer":
            x["masked_lm_positions"] = data["masked_lm_positions"]
        if name == "choices":
            x = {k: np.stack([v, v[::-1]], 1) for k, v in inputs.items()}  # (B, 2, S)
        results.update(flat_outputs(name, model(x, training=False)))

    # Backward and fit: two steps of the classifier from the saved weights, dropout off (its masks
    # come from each backend's own random numbers).
    model = keras.saving.load_model(os.path.join(work, "classifier.keras"))
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
    )
    before = [keras.ops.convert_to_numpy(w).copy() for w in model.trainable_weights]
    history = model.fit(inputs, {"logits": data["labels"]}, batch_size=4, epochs=2, verbose=0)
    results["fit/loss"] = np.array(history.history["loss"])
    results["fit/moved"] = np.array(
        [np.abs(keras.ops.convert_to_numpy(w) - b).max() for w, b in zip(model.weights, before)]
    )
    results["fit/logits"] = keras.ops.convert_to_numpy(model(inputs)["logits"])

    # Keras' own int8 quantization reaches every dense layer of the blocks through __call__.
    model = keras.saving.load_model(os.path.join(work, "classifier.keras"))
    model.quantize("int8")
    results["int8/logits"] = keras.ops.convert_to_numpy(model(inputs)["logits"])

    minilm = os.path.join(work, "minilm.json")
    if os.path.exists(minilm):
        with open(minilm) as f:
            directory = json.load(f)["dir"]
        ids = dict(np.load(os.path.join(work, "minilm_ids.npz")))
        real = checkpoints.load_encoder(directory)
        results.update(flat_outputs("minilm", real(ids, training=False)))
    np.savez(os.path.join(work, f"{backend}.npz"), **results)


if __name__ == "__main__":
    main(sys.argv[1])
