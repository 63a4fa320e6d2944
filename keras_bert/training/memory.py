"""Out-of-memory on the accelerator, explained: the batch that did not fit and what to change."""

import contextlib

import tensorflow as tf


class OutOfMemoryError(MemoryError):
    """A batch did not fit in the device's memory (`tf.errors.ResourceExhaustedError`, kept as
    `__cause__`); the message names the batch size, the sequence length and what to change."""


@contextlib.contextmanager
def out_of_memory_hint(stage, batch_size, seq_length, hint):
    """Turns a `tf.errors.ResourceExhaustedError` raised inside into an `OutOfMemoryError`.

    Args:
        stage: str, what was running ("training", "evaluation").
        batch_size: int, the batch size of that stage (its setting's name is in `hint`).
        seq_length: int, the (longest) sequence length.
        hint: str, the settings to change, e.g. "use a smaller batch_size".
    """
    try:
        yield
    except tf.errors.ResourceExhaustedError as error:
        raise OutOfMemoryError(
            f"Out of device memory in {stage} with batch size {batch_size} and sequence "
            f"length {seq_length}: {hint}."
        ) from error
