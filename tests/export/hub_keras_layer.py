"""TF Hub's "classify text with BERT" recipe on an exported pair, with tf-keras (Keras 2).

    python hub_keras_layer.py '<json>'   with keys preprocessor, encoder, texts, labels, out

Builds text -> hub.KerasLayer(preprocessor) -> hub.KerasLayer(encoder, trainable=True) ->
dropout -> dense, writes the encoder outputs on `texts` and whether one training step
changed the encoder's weights. Runs in its own process: TF_USE_LEGACY_KERAS makes tf.keras
tf-keras there, which tensorflow_hub needs.
"""

import json
import os
import sys
import types

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(spec):
    import packaging.version

    # tensorflow_hub 0.16 imports pkg_resources, which setuptools >= 81 no longer ships.
    sys.modules.setdefault(
        "pkg_resources", types.SimpleNamespace(parse_version=packaging.version.parse)
    )
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    text_input = tf_keras.layers.Input(shape=(), dtype=tf.string, name="text")
    encoder_inputs = hub.KerasLayer(spec["preprocessor"], name="preprocessing")(text_input)
    encoder = hub.KerasLayer(spec["encoder"], trainable=True, name="BERT_encoder")
    outputs = encoder(encoder_inputs)
    net = tf_keras.layers.Dropout(0.1)(outputs["pooled_output"])
    net = tf_keras.layers.Dense(1, activation=None, name="classifier")(net)
    classifier = tf_keras.Model(text_input, net)
    features = tf_keras.Model(
        text_input, {k: outputs[k] for k in ("pooled_output", "sequence_output", "default")}
    )

    texts = tf.constant(spec["texts"])
    result = {k: v.numpy().tolist() for k, v in features(texts, training=False).items()}
    before = [w.numpy() for w in encoder.trainable_weights]
    classifier.compile(
        optimizer=tf_keras.optimizers.Adam(1e-3),
        loss=tf_keras.losses.BinaryCrossentropy(from_logits=True),
    )
    history = classifier.fit(
        texts,
        tf.constant(spec["labels"], tf.float32),
        epochs=2,
        batch_size=len(spec["texts"]),
        verbose=0,
    )
    result["num_trainable"] = len(encoder.trainable_weights)
    result["changed"] = sum(
        not np.array_equal(b, w.numpy()) for b, w in zip(before, encoder.trainable_weights)
    )
    result["loss"] = history.history["loss"]
    with open(spec["out"], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
