"""Atomic writes, local or on gs:// (through tf.io.gfile): the small files a run keeps (history,
plots, vocab.txt), whole directories (a fine-tuned model, an export version) and files added
to a directory (a checkpoint's files beside others)."""

import contextlib
import os
import uuid

import tensorflow as tf


def write_atomic(path, data):
    """Write `data` (bytes or str) to `path` through a temporary file and a rename.

    A reader never sees a half-written file: it sees the old one or the new one.
    """
    tmp = f"{path}.tmp"
    with tf.io.gfile.GFile(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    tf.io.gfile.rename(tmp, path, overwrite=True)


@contextlib.contextmanager
def atomic_directory(path, replace=False, tmp_name=None):
    """Yields a temporary directory beside `path` that becomes `path` when the block ends.

    Readers see the old directory or the whole new one, never a half-written one; on an
    error in the block the temporary directory is removed and `path` is left as it was.

    Args:
        path: str, the directory to write (local or gs://; its parent is created).
        replace: bool. Replace an existing `path` (moved aside, then removed); otherwise an
            existing `path`, before or after writing, is a `FileExistsError`.
        tmp_name: str or None. The temporary directory's name (default: ".<name>.tmp-<random>"),
            e.g. one a server that scans the parent ignores.
    """
    path = path.rstrip("/")
    parent, name = os.path.split(path)
    if tf.io.gfile.exists(path) and not replace:
        raise FileExistsError(f"{path} exists and is not replaced.")
    tmp = os.path.join(parent, tmp_name or f".{name}.tmp-{uuid.uuid4().hex[:8]}")
    tf.io.gfile.makedirs(tmp)
    try:
        yield tmp
        if not tf.io.gfile.exists(path):
            tf.io.gfile.rename(tmp, path, overwrite=False)
        elif not replace:
            raise FileExistsError(f"{path} appeared while it was being written.")
        else:
            old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:8]}")
            tf.io.gfile.rename(path, old)
            tf.io.gfile.rename(tmp, path)
            tf.io.gfile.rmtree(old)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.rmtree(tmp)


@contextlib.contextmanager
def atomic_files(path, names, overwrite=False):
    """Yields a temporary directory; on success its files appear in `path`, beside the files
    already there (`atomic_directory` replaces a whole directory).

    A new `path` appears whole, by one rename. Into an existing directory (other files
    there are kept), each file is moved by a rename that replaces it, so no reader sees a
    partial file. On error nothing is changed and the temporary directory is removed.

    Args:
        path: output directory (local or gs://).
        names: file names that will be written (checked against existing files).
        overwrite: bool. Replace those files where they already exist.

    Raises:
        NotADirectoryError: `path` is a file.
        FileExistsError: some of `names` exist in `path` and not `overwrite`.
    """
    path = os.fspath(path).rstrip("/")
    if "://" not in path:
        path = os.path.abspath(path)
    exists = tf.io.gfile.exists(path)
    if exists and not tf.io.gfile.isdir(path):
        raise NotADirectoryError(f"Checkpoint output {path} exists and is not a directory.")
    if exists and not overwrite:
        clashes = sorted(n for n in names if tf.io.gfile.exists(os.path.join(path, n)))
        if clashes:
            raise FileExistsError(
                f"{path} already holds {clashes}; pass overwrite=True to replace them."
            )
    parent = path if exists else os.path.dirname(path)
    tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex[:8]}")
    tf.io.gfile.makedirs(tmp)
    try:
        yield tmp
        if not exists:
            tf.io.gfile.rename(tmp, path)
            return
        # Index and config last: their presence marks the checkpoint complete.
        for name in sorted(tf.io.gfile.listdir(tmp), key=lambda n: n.endswith((".index", ".json"))):
            tf.io.gfile.rename(os.path.join(tmp, name), os.path.join(path, name), overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.rmtree(tmp)
