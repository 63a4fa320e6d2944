"""Shared pytest set-up: TensorFlow backend, quiet logs, deterministic seeds."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two test workers share the 2 cores: one compute thread each avoids oversubscription.
    # (Inter-op threads stay at the default: in-process collectives need more than one.)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts from float32, seeded, with a clean Keras session."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
