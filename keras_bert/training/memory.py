"""Out-of-memory on the accelerator, explained: the batch that did not fit and what to change."""

import contextlib

import tensorflow as tf


class OutOfMemoryError(MemoryError):
    """A batch did not fit in the device's memory (`tf.errors.ResourceExhaustedError`, or JAX's
    RESOURCE_EXHAUSTED runtime error, kept as `__cause__`); the message names the batch size,
    the sequence length and what to change."""


def is_out_of_memory(error):
    """True for TensorFlow's `ResourceExhaustedError` and XLA's RESOURCE_EXHAUSTED errors (JAX
    raises them as `XlaRuntimeError` / `JaxRuntimeError`)."""
    if isinstance(error, tf.errors.ResourceExhaustedError):
        return True
    return type(error).__name__ in ("XlaRuntimeError", "JaxRuntimeError") and str(error).startswith(
        "RESOURCE_EXHAUSTED"
    )


@contextlib.contextmanager
def out_of_memory_hint(stage, batch_size, seq_length, hint):
    """Turns an out-of-memory error raised inside (`is_out_of_memory`) into an
    `OutOfMemoryError`.

    Args:
        stage: str, what was running ("training", "evaluation").
        batch_size: int, the batch size of that stage (its setting's name is in `hint`).
        seq_length: int, the (longest) sequence length.
        hint: str, the settings to change, e.g. "use a smaller batch_size".
    """
    try:
        yield
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        raise OutOfMemoryError(
            f"Out of device memory in {stage} with batch size {batch_size} and sequence "
            f"length {seq_length}: {hint}."
        ) from error
