"""ReplicaDropout: Keras' masks on one device, different masks on each tf.distribute replica."""

import subprocess
import sys
import textwrap

import keras
import numpy as np

from keras_bert.layers.dropout import ReplicaDropout


def test_same_masks_as_keras_dropout_on_one_device():
    x = np.ones((4, 64), np.float32)
    ours, theirs = ReplicaDropout(0.3, seed=11), keras.layers.Dropout(0.3, seed=11)
    for _ in range(3):  # Successive calls advance both seed generators alike.
        np.testing.assert_array_equal(ours(x, training=True), theirs(x, training=True))
    np.testing.assert_array_equal(ours(x, training=False), x)


def test_replicas_draw_different_masks():
    script = textwrap.dedent("""
        import numpy as np, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        from keras_bert.layers.dropout import ReplicaDropout
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            ours, theirs = ReplicaDropout(0.5, seed=3), keras.layers.Dropout(0.5, seed=3)
        x = tf.ones([8, 256])
        for layer in (ours, theirs):
            masks = strategy.experimental_local_results(
                strategy.run(tf.function(lambda: layer(x, training=True))))
            a, b = (m.numpy() != 0 for m in masks)
            print(type(layer).__name__, int((a != b).sum()), round(float(a.mean()), 2))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    results = {
        name: (int(diff), float(kept))
        for name, diff, kept in (line.split() for line in out.stdout.strip().splitlines())
    }
    assert results["Dropout"][0] == 0  # What Keras does: one mask for all replicas.
    assert (
        results["ReplicaDropout"][0] > 8 * 256 * 0.3
    )  # Ours: independent masks (about half differ).
    assert 0.4 < results["ReplicaDropout"][1] < 0.6
