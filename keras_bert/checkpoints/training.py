"""Training checkpoints: model, optimizer (with its step and learning rate) and dropout seeds;
and a model's weights alone (`write_weights` / `read_weights`: a fine-tuning run's best epoch).

`training_checkpoint` picks the format of the backend: on TensorFlow a `TrainingCheckpoint`
(`tf.train.Checkpoint`: the Keras variables are `tf.Variable`s); on JAX and PyTorch, whose
variables are not, a `VariablesCheckpoint` (`keras_bert.checkpoints.variables_checkpoint`: the
values of the same variables in a NumPy archive, with the same guarantees).

`tf.train.CheckpointManager` writes `ckpt-<step>` files and only then rewrites the small
`checkpoint` state file (atomically), so a run killed while saving resumes from the previous
complete checkpoint. Restoring first reads every tensor of the checkpoint (catching truncated
or corrupt files), and a checkpoint that does not fit is rolled back: a broken checkpoint is
reported with `CheckpointError`, never half-loaded. Paths may be local or `gs://`.
"""

import os

import keras
import tensorflow as tf

from keras_bert.checkpoints import variables_checkpoint
from keras_bert.checkpoints.files import verify_checkpoint
from keras_bert.errors import CheckpointError
from keras_bert.training import strategies


def training_checkpoint(directory, model, optimizer, max_to_keep=5, strategy=None):
    """The backend's training checkpoint of `model` and `optimizer` in `directory`:
    `TrainingCheckpoint` on TensorFlow, `variables_checkpoint.VariablesCheckpoint` elsewhere
    (both: `latest`, `save(step)`, `restore_latest()`, `restore(path)`). Args as
    `TrainingCheckpoint`'s; `strategy` a tf.distribute strategy, or on JAX the run's
    `KerasDistribution` (only its chief writes)."""
    if keras.config.backend() == "tensorflow":
        return TrainingCheckpoint(directory, model, optimizer, max_to_keep, strategy)
    chief = getattr(strategy, "is_chief", True)
    return variables_checkpoint.VariablesCheckpoint(
        directory, model, optimizer, max_to_keep=max_to_keep, chief=chief
    )


class TrainingCheckpoint:
    """Save and restore the whole training state every N steps.

    The step is the optimizer's update counter, so restoring a checkpoint also restores the
    learning rate of the schedule. The state of the dropout seed generators is saved too, so
    a resumed run draws the same dropout masks as an uninterrupted one.

    Args:
        directory: str. Where checkpoints are written (the run's model_dir).
        model: `keras.Model`.
        optimizer: built `keras.optimizers.Optimizer`.
        max_to_keep: int. Checkpoints kept (older ones are deleted).
        strategy: optional `tf.distribute.Strategy`; in multi-worker training every worker
            saves (the save is collective) but only the chief's files are kept.

    Example:
    >>> ckpt = TrainingCheckpoint(model_dir, model, optimizer, max_to_keep=3)
    >>> start_step = ckpt.restore_latest()  # 0 when there is none
    >>> ckpt.save(step)
    """

    def __init__(self, directory, model, optimizer, max_to_keep=5, strategy=None):
        self.directory = directory
        self.optimizer = optimizer
        self.is_chief = strategy is None or strategies.is_chief(strategy)
        seeds = {
            f"seed_{i}": v
            for i, v in enumerate(model.non_trainable_variables)
            if "seed_generator" in v.path
        }
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, seed_generators=seeds
        )
        self._variables = list(model.variables) + list(optimizer.variables)
        write_dir = (
            directory
            if self.is_chief
            else os.path.join(directory, f".worker_{strategies.worker_id(strategy)}_tmp")
        )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, write_dir, max_to_keep=max_to_keep, checkpoint_name="ckpt"
        )
        self._reader_manager = (
            self.manager
            if self.is_chief
            else tf.train.CheckpointManager(
                self.checkpoint, directory, max_to_keep=max_to_keep, checkpoint_name="ckpt"
            )
        )

    @property
    def latest(self):
        """Path of the newest complete checkpoint in `directory`, or None."""
        return self._reader_manager.latest_checkpoint

    def save(self, step):
        """Write `ckpt-<step>`; returns its path (on the chief) or None (other workers)."""
        path = self.manager.save(checkpoint_number=int(step))
        if not self.is_chief:
            tf.io.gfile.rmtree(self.manager.directory)
            return None
        return path

    def restore_latest(self):
        """Restore the newest checkpoint if there is one; returns the restored step (0 if none)."""
        return self.restore(self.latest) if self.latest else 0

    def restore(self, path):
        """Restore `path` completely or not at all; returns the restored step.

        Raises:
            CheckpointError: naming the checkpoint and the problem.
        """
        verify_checkpoint(path)
        before = [v.numpy() for v in self._variables]
        try:
            self.checkpoint.read(path).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as e:
            for v, value in zip(self._variables, before):
                v.assign(value)
            raise CheckpointError(
                f"Checkpoint {path} does not match this model and optimizer "
                f"(nothing was loaded): {e}"
            ) from e
        return int(self.optimizer.iterations.numpy())


def write_weights(model, path):
    """Writes the weights of `model` (no optimizer) as the checkpoint prefix `path` (local or
    gs://): a `tf.train.Checkpoint` on TensorFlow, `<path>.npz` on the other backends.

    Returns:
        str, the path written.
    """
    if keras.config.backend() != "tensorflow":
        variables_checkpoint.write_variables(f"{path}.npz", model.weights)
        return path
    return _weights_checkpoint(model).write(path)


def read_weight_values(model, path):
    """The arrays of a `write_weights` checkpoint written on JAX or PyTorch (`<path>.npz`), one
    per `model.weights`, checked against them, not assigned (several JAX hosts assign them
    together: `keras_bert.training.distribution.assign_from_chief`)."""
    return variables_checkpoint.read_values(f"{path}.npz", model.weights)


def read_weights(model, path):
    """Reads weights written by `write_weights` into `model`.

    Raises:
        CheckpointError: the checkpoint is unreadable or does not hold this model's weights.
    """
    if keras.config.backend() != "tensorflow":
        variables_checkpoint.read_variables(f"{path}.npz", model.weights)
        return
    try:
        _weights_checkpoint(model).read(path).assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        raise CheckpointError(
            f"Checkpoint {path} does not hold the weights of this model: {e}"
        ) from e


def _weights_checkpoint(model):
    """A `tf.train.Checkpoint` of `model.weights` alone, in order: not of the model object, which
    holds its optimizer once compiled (a fine-tuning run compiles its task model), and whose
    step a best epoch's weights must not carry back."""
    return tf.train.Checkpoint(weights=list(model.weights))
