"""Versioned export directories as TF Serving reads them: `<export_dir>/<version>/`.

A version is written into a hidden temporary directory beside the versions (TF Serving
only loads all-digit names) and renamed into place once it is complete and checked, so a
server never sees half a version and a failed export leaves nothing behind. An existing
version is never replaced.
"""

import contextlib
import os
import re
import uuid

import tensorflow as tf

from keras_bert.io_utils import atomic_directory

_VERSION_RE = re.compile(r"^\d+$")


def versions(export_dir):
    """The integer versions present in `export_dir`, sorted ([] if it does not exist)."""
    if not tf.io.gfile.isdir(export_dir):
        return []
    return sorted(
        int(n.rstrip("/"))
        for n in tf.io.gfile.listdir(export_dir)
        if _VERSION_RE.match(n.rstrip("/"))
    )


def next_version(export_dir):
    """One more than the highest version in `export_dir`, or 1."""
    present = versions(export_dir)
    return present[-1] + 1 if present else 1


@contextlib.contextmanager
def new_version(export_dir, version=None):
    """Yields a temporary directory that becomes `<export_dir>/<version>` when the block ends.

    Args:
        export_dir: str, the model's base directory (created if missing; local or gs://).
        version: int or None (the next version).

    Yields:
        (tmp_dir, final_dir): write into tmp_dir; final_dir is where it will appear.

    Raises:
        FileExistsError: the version exists already (before or after writing).
        ValueError: version is not a non-negative integer.
    On any error in the block the temporary directory is removed and the error re-raised.
    """
    if version is None:
        version = next_version(export_dir)
    if isinstance(version, bool) or not str(version).isdigit():
        raise ValueError(
            f"version must be a non-negative integer (TF Serving's version directories), "
            f"got {version!r}."
        )
    final = os.path.join(export_dir, str(int(version)))
    if tf.io.gfile.exists(final):
        raise FileExistsError(
            f"{final} exists; versions are never overwritten. Pick another --version or "
            f"leave it out to write version {next_version(export_dir)}."
        )
    # A hidden name: TF Serving only loads all-digit ones.
    with atomic_directory(final, tmp_name=f".tmp-{int(version)}-{uuid.uuid4().hex[:8]}") as tmp:
        yield tmp, final
