"""A backend-neutral training checkpoint: the values of Keras variables in a NumPy archive.

On JAX and PyTorch, Keras variables are not `tf.Variable`s, so `tf.train.Checkpoint` cannot
save them. `VariablesCheckpoint` saves the same state as the TensorFlow `TrainingCheckpoint`
(model variables, dropout seed-generator states among them, and optimizer variables: step,
moments), with its guarantees:

- atomic: `ckpt-<step>/` (`variables.npz`, `manifest.json`: each variable's path, shape and
  dtype) is written as a whole directory, then `checkpoint.json` (the state file: newest and
  kept checkpoints) is rewritten atomically; a run killed while saving resumes from the previous
  complete checkpoint;
- all or nothing: restoring reads every array first (a truncated or corrupt archive fails its
  zip checksums) and checks each against its variable (path, shape) before assigning any;
  a broken or foreign checkpoint is a `CheckpointError`, never half-loaded;
- exact: values round-trip bit for bit, so a resumed run's next losses equal an uninterrupted
  run's.

Paths may be local or gs:// (`tf.io.gfile`).
"""

import io
import json
import os
import re
import zipfile

import keras
import numpy as np
import tensorflow as tf

from keras_bert.errors import CheckpointError
from keras_bert.io_utils import atomic_directory, write_atomic

STATE_FILE = "checkpoint.json"  # {"latest": name, "kept": [names, oldest first]}
ARRAYS, MANIFEST = "variables.npz", "manifest.json"


class VariablesCheckpoint:
    """Save and restore the whole training state (see the module); the interface of
    `keras_bert.checkpoints.training.TrainingCheckpoint`.

    Args:
        directory: str. Where `ckpt-<step>/` directories and `checkpoint.json` are written.
        model: `keras.Model` (its `variables`: weights and seed-generator states).
        optimizer: built `keras.optimizers.Optimizer` (its `variables`: iterations, moments).
        max_to_keep: int. Checkpoints kept (older ones are deleted).
        chief: bool. False on processes that only read (several hosts: process 0 writes).
    """

    def __init__(self, directory, model, optimizer, max_to_keep=5, chief=True):
        self.directory = directory
        self.optimizer = optimizer
        self.max_to_keep = max_to_keep
        self.is_chief = chief
        self._variables = list(model.variables) + list(optimizer.variables)

    def _state(self):
        path = os.path.join(self.directory, STATE_FILE)
        if not tf.io.gfile.exists(path):
            return {"latest": None, "kept": []}
        with tf.io.gfile.GFile(path) as f:
            return json.load(f)

    @property
    def latest(self):
        """Path of the newest complete checkpoint in `directory`, or None."""
        latest = self._state()["latest"]
        return os.path.join(self.directory, latest) if latest else None

    def save(self, step):
        """Write `ckpt-<step>/`; returns its path (None on processes that do not write)."""
        if not self.is_chief:
            return None
        name = f"ckpt-{int(step)}"
        path = os.path.join(self.directory, name)
        with atomic_directory(path, replace=True) as tmp:
            write_variables(os.path.join(tmp, ARRAYS), self._variables)
        state = self._state()
        kept = [n for n in state["kept"] if n != name] + [name]
        write_atomic(
            os.path.join(self.directory, STATE_FILE),
            json.dumps({"latest": name, "kept": kept[-self.max_to_keep :]}),
        )
        for old in kept[: -self.max_to_keep]:
            if tf.io.gfile.exists(os.path.join(self.directory, old)):
                tf.io.gfile.rmtree(os.path.join(self.directory, old))
        return path

    def restore_latest(self):
        """Restore the newest checkpoint if there is one; returns the restored step (0 if none)."""
        return self.restore(self.latest) if self.latest else 0

    def restore(self, path):
        """Restore `path` (a `ckpt-<step>` directory) completely or not at all; returns the
        restored step.

        Raises:
            CheckpointError: naming the checkpoint and the problem.
        """
        read_variables(os.path.join(path, ARRAYS), self._variables, name=path)
        return int(keras.ops.convert_to_numpy(self.optimizer.iterations))


def _key(index):
    return f"{index:05d}"  # Paths are in the manifest (their numbering varies between models).


def write_variables(path, variables):
    """Writes the values of `variables` to the NumPy archive `path` (local or gs://, through a
    temporary file and a rename), with a manifest of their paths, shapes and dtypes."""
    arrays, manifest = {}, []
    for i, v in enumerate(variables):
        value = np.asarray(keras.ops.convert_to_numpy(v.value))
        manifest.append({"path": v.path, "shape": list(value.shape), "dtype": str(value.dtype)})
        if value.dtype.kind not in "biuf" or value.dtype.itemsize == 2 and value.dtype.kind == "f":
            value = value.astype(np.float32)  # bfloat16 / float16: exact in float32.
        arrays[_key(i)] = value
    buffer = io.BytesIO()
    tf.io.gfile.makedirs(os.path.dirname(path) or ".")
    np.savez(buffer, **arrays, **{MANIFEST: np.frombuffer(json.dumps(manifest).encode(), np.uint8)})
    write_atomic(path, buffer.getvalue())


def read_variables(path, variables, name=None):
    """Reads what `write_variables` wrote into `variables`: all of them or none.

    Raises:
        CheckpointError: the file is missing, truncated or corrupt, or does not hold these
            variables (another count, path or shape).
    """
    for v, value in zip(variables, read_values(path, variables, name)):
        v.assign(keras.ops.cast(value, v.dtype))


def read_values(path, variables, name=None):
    """The arrays `write_variables` wrote, one per variable of `variables` (checked against
    them as `read_variables` does), not assigned.

    Returns:
        list of NumPy arrays.
    """
    name = name or path
    manifest, arrays = _read(path, name)
    problem = _mismatch(manifest, variables)
    if problem:
        raise CheckpointError(
            f"Checkpoint {name} does not match this model and optimizer (nothing was loaded): "
            f"{problem}"
        )
    return [arrays[_key(i)] for i in range(len(variables))]


def read_arrays(path):
    """{variable path: array} of what `write_variables` wrote (the first of equal paths), for
    reading some of the variables into another model, such as the encoder of a pre-trainer.

    Raises:
        CheckpointError: the file is missing, truncated or corrupt.
    """
    manifest, arrays = _read(path, path)
    by_path = {}
    for i, entry in enumerate(manifest):
        by_path.setdefault(entry["path"], arrays[_key(i)])
    return by_path


def _read(path, name):
    """(manifest, {key: array}) of an archive, every CRC checked."""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            archive = np.load(io.BytesIO(f.read()), allow_pickle=False)
            arrays = {key: archive[key] for key in archive.files}  # Checks every CRC.
        return json.loads(arrays.pop(MANIFEST).tobytes()), arrays
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, tf.errors.OpError) as e:
        raise CheckpointError(
            f"Checkpoint {name} is corrupt or incomplete: {e}. Delete it (and its entry in "
            f"{STATE_FILE}) to resume from an earlier one."
        ) from e


def _mismatch(manifest, variables):
    """What differs between a checkpoint's manifest and `variables`, or None."""
    if len(manifest) != len(variables):
        return f"{len(manifest)} variables saved, {len(variables)} here."
    for saved, v in zip(manifest, variables):
        # Seed generators' and optimizer slots' numbering may differ between models built in
        # one process: compare paths without the numeric suffixes Keras adds.
        if _plain(saved["path"]) != _plain(v.path) or tuple(saved["shape"]) != tuple(v.shape):
            return f"saved {saved['path']} {saved['shape']}, here {v.path} {list(v.shape)}."
    return None


def _plain(path):
    return re.sub(r"_\d+(?=/|$)", "", path)
