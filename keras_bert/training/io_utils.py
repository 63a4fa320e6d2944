"""Atomic writes of the small files a run keeps (history, plots), local or on gs://."""

import tensorflow as tf


def write_atomic(path, data):
    """Write `data` (bytes or str) to `path` through a temporary file and a rename.

    A reader never sees a half-written file: it sees the old one or the new one.
    """
    tmp = f"{path}.tmp"
    with tf.io.gfile.GFile(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    tf.io.gfile.rename(tmp, path, overwrite=True)
