"""Several devices on the JAX backend: `keras.distribution` from the `distribution` flag.

The TensorFlow backend trains under a `tf.distribute` strategy (`--strategy`,
`keras_bert.training.strategies`); JAX under a `keras.distribution` (`--distribution`):

- "none": one device (the default).
- "data_parallel": `keras.distribution.DataParallel` over every device: the variables are
  replicated, each global batch is split over the devices along its first axis, XLA sums the
  gradients (one program, one loss over the global batch: the same update as one device).
- "model_parallel": `keras.distribution.ModelParallel` on a (batch, model) mesh with
  `model_parallel_devices` devices on the model axis: the encoder's large kernels are split over
  them (`layout_map`, Megatron's split: query/key/value and the intermediate kernel by output
  column, the attention-output and output kernels by input row, the word embeddings by
  column), the batch over the rest.
- "auto": data_parallel where JAX sees two or more devices (a TPU slice, several GPUs), else none.

Several hosts (a TPU pod slice, a GPU cluster): every host runs the same command with
`KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES` and
`KERAS_DISTRIBUTION_PROCESS_ID` set (`keras.distribution.initialize` reads them; on a TPU pod
`KERAS_DISTRIBUTION_NUM_PROCESSES` alone, JAX finds the rest); the mesh then spans every host's
devices, each host reads its share of every global batch, and process 0 is the chief (writes).
Every host restores the newest checkpoint of `model_dir` when resuming, so `model_dir` must be a
path all hosts read (gs://, a shared file system). CPU hosts work too: JAX's CPU collectives are
gloo over TCP by default (`jax_cpu_collectives_implementation`); tests/training/test_multihost.py
runs two processes joined so on one machine.

A `KerasDistribution` stands where the runners hold a `tf.distribute.Strategy`: `scope()`,
`num_replicas_in_sync` (devices on the batch axis), `is_chief`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import keras

from keras_bert.training.choices import DISTRIBUTIONS

# Megatron-style split of the encoder's kernels over the "model" axis (regex on variable paths).
ENCODER_LAYOUT = {
    r"(query|key|value|intermediate_dense)/kernel$": (None, "model"),
    r"(query|key|value|intermediate_dense)/bias$": ("model",),
    r"(attention_output_dense|output_dense)/kernel$": ("model", None),
    r"word_embeddings$": (None, "model"),
}
_ENV = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES")
_initialized = False


class KerasDistribution:
    """A `keras.distribution.Distribution` (or None: one device) as the runners use a strategy.

    Args:
        distribution: `keras.distribution.Distribution` or None.
    """

    def __init__(self, distribution=None):
        self.distribution = distribution

    def scope(self):
        """The distribution's scope (variables made inside get its layouts)."""
        return self.distribution.scope() if self.distribution else contextlib.nullcontext()

    @property
    def num_replicas_in_sync(self) -> int:
        """Devices the global batch is split over."""
        if self.distribution is None:
            return 1
        mesh = self.distribution.device_mesh
        return int(mesh.shape[mesh.axis_names.index(self.distribution.batch_dim_name)])

    @property
    def is_chief(self) -> bool:
        """True on process 0, which writes checkpoints, summaries and the model."""
        import jax

        return jax.process_index() == 0

    def process_batches(self, batches: list) -> list:
        """This process's rows of each global batch (lists of example indices): all of them on
        one host; on several, the process's contiguous share (process p of P: rows
        [p*B/P, (p+1)*B/P)), which Keras assembles into the global batch in process order.

        For input pipelines whose batch size is not static (Keras' own sharding needs it): the
        returned batches are this process's share already, so Keras' sharding is turned off.

        Args:
            batches: list of global batches, each a sequence of B example indices.

        Returns:
            list of sequences of B/P example indices.
        """
        return [b[slice(*self.process_share(len(b)))] for b in batches]

    def process_share(self, count: int) -> tuple[int, int]:
        """(first, last): this process's contiguous share of `count` rows or per-device packs
        (process p of P: [p*count/P, (p+1)*count/P); all of them on one host). On several hosts
        Keras' own sharding is turned off: the caller feeds this process's share."""
        import jax

        processes, index = jax.process_count(), jax.process_index()
        if processes == 1 or self.distribution is None:
            return 0, count
        self.distribution.auto_shard_dataset = False
        return count * index // processes, count * (index + 1) // processes


def several_hosts(strategy: Any) -> bool:
    """True for a `KerasDistribution` whose processes (hosts) are more than one."""
    if not is_keras_distribution(strategy):
        return False
    import jax

    return jax.process_count() > 1


def assign_from_chief(variables: list, values: list | None) -> bool:
    """Several hosts: every process assigns the chief's `values` to `variables`. Assigning a
    variable of a multi-host JAX mesh is a collective (JAX checks that every host puts the
    same value), so every process calls this, and the values come from process 0 by broadcast.

    Args:
        variables: list of Keras variables (the same on every process).
        values: list of arrays, one per variable, on the chief (ignored elsewhere); None on the
            chief: nothing is assigned, anywhere.

    Returns:
        bool: whether the variables were assigned.
    """
    import numpy as np
    from jax.experimental import multihost_utils

    if not multihost_utils.broadcast_one_to_all(np.int32(values is not None)):
        return False
    if values is None:  # Not the chief: placeholders of the broadcast's shapes and dtypes.
        values = [np.zeros(v.shape, keras.backend.standardize_dtype(v.dtype)) for v in variables]
    values = multihost_utils.broadcast_one_to_all([np.asarray(x) for x in values])
    for v, value in zip(variables, values):
        v.assign(keras.ops.cast(value, v.dtype))
    return True


def check_backend(strategy: str, distribution: str) -> None:
    """Raises ValueError when the flag of the other backend is set: a tf.distribute `strategy`
    other than "default" on JAX, or a `distribution` other than "none" on TensorFlow.

    Args:
        strategy: the `--strategy` value. distribution: the `--distribution` value.
    """
    backend = keras.config.backend()
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}.")
    if backend == "jax" and strategy != "default":
        raise ValueError(
            f"strategy={strategy!r} is a tf.distribute strategy, for the TensorFlow backend; on "
            f"JAX use distribution (--distribution=data_parallel, model_parallel or auto), or "
            f"run with KERAS_BACKEND=tensorflow."
        )
    if backend != "jax" and distribution != "none":
        raise ValueError(
            f"distribution={distribution!r} is a keras.distribution, for the JAX backend "
            f"(KERAS_BACKEND=jax); on {backend} use strategy (--strategy=mirrored, "
            f"multi_worker_mirrored, tpu or auto)."
        )


def initialize_hosts() -> None:
    """`keras.distribution.initialize()` once per process where the environment names several
    processes (see the module); nothing otherwise."""
    global _initialized
    if _initialized or not any(os.environ.get(name) for name in _ENV):
        return
    keras.distribution.initialize()
    _initialized = True


def get_distribution(name: str = "none", model_parallel_devices: int = 2) -> KerasDistribution:
    """The `KerasDistribution` of `name`, also set as Keras' global distribution (fit, evaluate
    and predict read it; "none" clears an earlier run's).

    Args:
        name: one of `DISTRIBUTIONS`.
        model_parallel_devices: int. Devices on the model axis of "model_parallel".

    Returns:
        `KerasDistribution`.

    Raises:
        ValueError: unknown name, or devices that do not fit the mesh.
    """
    initialize_hosts()
    devices = keras.distribution.list_devices()
    if name == "auto":
        name = "data_parallel" if len(devices) > 1 else "none"
    distribution: Any = None
    if name == "data_parallel":
        distribution = keras.distribution.DataParallel(devices=devices)
    elif name == "model_parallel":
        distribution = _model_parallel(devices, model_parallel_devices)
    elif name != "none":
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {name!r}.")
    keras.distribution.set_distribution(distribution)
    return KerasDistribution(distribution)


def _model_parallel(devices, model_devices):
    if model_devices < 1 or len(devices) % model_devices:
        raise ValueError(
            f"model_parallel_devices={model_devices} must divide the {len(devices)} devices."
        )
    mesh = keras.distribution.DeviceMesh(
        (len(devices) // model_devices, model_devices), ["batch", "model"], devices
    )
    return keras.distribution.ModelParallel(layout_map=layout_map(mesh), batch_dim_name="batch")


def layout_map(mesh) -> Any:
    """`keras.distribution.LayoutMap` of `ENCODER_LAYOUT` on `mesh` (axes "batch", "model")."""
    layouts = keras.distribution.LayoutMap(mesh)
    for pattern, axes in ENCODER_LAYOUT.items():
        layouts[pattern] = axes
    return layouts


def resolve_precision(mixed_precision: str) -> str:
    """`mixed_precision` with "auto" replaced by what JAX's devices want: mixed_bfloat16 on TPU,
    mixed_float16 on GPU (with loss scaling), else none."""
    if mixed_precision != "auto":
        return mixed_precision
    import jax

    platform = jax.devices()[0].platform
    return {"tpu": "mixed_bfloat16", "gpu": "mixed_float16"}.get(platform, "none")


def check_batch(batch_size: int, distribution: KerasDistribution, what: str = "batch_size") -> None:
    """Raises ValueError when `batch_size` does not split evenly over the batch axis."""
    replicas = distribution.num_replicas_in_sync
    if batch_size % replicas:
        raise ValueError(
            f"{what} {batch_size} does not split evenly over the {replicas} devices of the "
            f"distribution: use a multiple of {replicas}."
        )


def is_keras_distribution(strategy: Any) -> bool:
    """True for a `KerasDistribution` (JAX), False for a `tf.distribute.Strategy`."""
    return isinstance(strategy, KerasDistribution)
