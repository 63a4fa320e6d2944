"""Keras callbacks of the step-based training loop: logging, TensorBoard, progress, checkpoints.

The runner calls `fit` with one Keras "epoch" per logging loop of `steps_per_loop` update
steps, so every epoch-end log is the mean over one loop and the step is the optimizer's
update counter (correct after a resume). The progress bar is `keras_bert.training.progress`'s:
log lines written while it is shown (this module's step lines, checkpoint and evaluation
messages) appear as whole lines above it, never inside its line.
"""

import json
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert.io_utils import write_atomic
from keras_bert.training import progress

SCALARS = (
    "loss",
    "mlm_loss",
    "nsp_loss",
    "mlm_accuracy",
    "nsp_accuracy",
    "rtd_loss",  # ELECTRA's replaced-token detection (keras_bert.models.electra).
    "rtd_accuracy",
)


class TrainingLog(keras.callbacks.Callback):
    """Record, print and summarize each loop: losses, accuracies, learning rate, examples/s.

    Args:
        num_train_steps: int. Update steps of the run (the progress bar's target).
        examples_per_step: int. Global batch size times gradient accumulation steps.
        history: list of earlier records (kept when resuming); new ones are appended.
        log_dir: str or None. TensorBoard directory for scalars (None: none written).
        history_path: str or None. JSON file rewritten (atomically) after each loop.
        verbose: bool. Show a progress bar (`keras_bert.training.progress.ProgressBar`).
    """

    def __init__(
        self,
        num_train_steps,
        examples_per_step,
        history=(),
        log_dir=None,
        history_path=None,
        verbose=True,
    ):
        super().__init__()
        self.num_train_steps = num_train_steps
        self.examples_per_step = examples_per_step
        self.history = list(history)
        self.history_path = history_path
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self.progbar = progress.ProgressBar(num_train_steps) if verbose else None
        self._start = self._step_at_start = None

    def close(self):
        """Ends the progress bar (done by itself at the last step; call it when training stops
        early)."""
        if self.progbar is not None:
            self.progbar.close()

    def _step(self):
        return int(self.model.optimizer.iterations.numpy())

    def on_epoch_begin(self, epoch, logs=None):
        self._start, self._step_at_start = time.perf_counter(), self._step()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._start
        step = self._step()
        record = {
            "step": step,
            **{k: float(np.reshape(v, [-1])[0]) for k, v in (logs or {}).items() if k in SCALARS},
        }
        record["learning_rate"] = float(
            keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
        )
        record["examples_per_second"] = (
            (step - self._step_at_start) * self.examples_per_step / max(seconds, 1e-9)
        )
        record["seconds"] = seconds
        self.history.append(record)
        if self.writer is not None:
            with self.writer.as_default(step=step):
                for key, value in record.items():
                    if key not in ("step", "seconds"):
                        tf.summary.scalar(f"train/{key}", value)
            self.writer.flush()
        if self.history_path:
            write_atomic(self.history_path, json.dumps(self.history, indent=1))
        logging.info(
            "step %d: %s", step, ", ".join(f"{k} {v:.4g}" for k, v in record.items() if k != "step")
        )
        if self.progbar is not None:
            shown = [(k, record[k]) for k in SCALARS if k in record]
            self.progbar.update(
                step,
                shown
                + [("lr", record["learning_rate"]), ("ex/s", round(record["examples_per_second"]))],
            )

    def write_eval(self, step, results):
        """Write evaluation results as `eval/<name>` scalars at `step`."""
        if self.writer is not None:
            with self.writer.as_default(step=step):
                for key, value in results.items():
                    tf.summary.scalar(f"eval/{key}", float(value))
            self.writer.flush()


class PeriodicCheckpoint(keras.callbacks.Callback):
    """Save a `TrainingCheckpoint` every `every` update steps and at the last step.

    Args:
        checkpoint: `keras_bert.checkpoints.training.TrainingCheckpoint`.
        every: int. Save when the update step is a multiple of this.
        num_train_steps: int. Always save at this step.
    """

    def __init__(self, checkpoint, every, num_train_steps):
        super().__init__()
        self.checkpoint = checkpoint
        self.every = every
        self.num_train_steps = num_train_steps
        self.last_path = None

    def on_epoch_end(self, epoch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.every == 0 or step >= self.num_train_steps:
            self.last_path = self.checkpoint.save(step) or self.last_path


def load_history(path, start_step):
    """The records of a history file (history.json, eval_history.json) up to `start_step`, where
    a resumed run continues; [] for a fresh run (start_step 0) or no file."""
    if start_step and tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            return [h for h in json.load(f) if h["step"] <= start_step]
    return []
