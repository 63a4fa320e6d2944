"""A `tf.distribute` strategy from a flag: default, mirrored, multi_worker_mirrored, tpu, auto.

multi_worker_mirrored reads the cluster from the `TF_CONFIG` environment variable (every
worker runs the same program); tpu connects through `TPUClusterResolver` (a name or
grpc:// address, "" or "local" for Colab / a TPU VM); auto takes the TPU if one answers, else
mirrored over two or more GPUs, else default (`resolve_auto` also picks the precision), so one
notebook or command runs unchanged on a TPU, GPU or CPU runtime. A TPU system is initialized once
per process and address, and a (multi-worker) mirrored strategy once per process: asking again
returns the same strategy.
"""

import json
import os

import tensorflow as tf
from absl import logging

from keras_bert.training.choices import STRATEGIES

_TPU_STRATEGIES: dict[
    str, tf.distribute.TPUStrategy
] = {}  # TPU address -> its TPUStrategy (initializing a TPU system again wipes it).
_MIRRORED_STRATEGIES: dict[str, tf.distribute.Strategy] = {}  # name -> the process's strategy.


def get_strategy(name="default", tpu=None):
    """Create the strategy named by `name`.

    Args:
        name: one of `STRATEGIES`.
        tpu: str or None. TPU name or address for "tpu" and "auto" ("" or "local" for the
            local TPU; "auto" tries "local" when None).

    Returns:
        `tf.distribute.Strategy`.

    Raises:
        ValueError: unknown name, or multi_worker_mirrored without a valid `TF_CONFIG`.
    """
    if name == "auto":
        name = auto_strategy_name(tpu)
        tpu = _auto_tpu(tpu)
    if name == "default":
        return tf.distribute.get_strategy()
    if name in ("mirrored", "multi_worker_mirrored"):
        # One per process: a second strategy's collectives reuse the first's instance keys, and
        # a run with other shapes (e.g. a LoRA run after a full one) fails in all-reduce.
        if name == "multi_worker_mirrored":
            _check_tf_config()
        if name not in _MIRRORED_STRATEGIES:
            _MIRRORED_STRATEGIES[name] = (
                tf.distribute.MultiWorkerMirroredStrategy()
                if name == "multi_worker_mirrored"
                else tf.distribute.MirroredStrategy()
            )
        return _MIRRORED_STRATEGIES[name]
    if name == "tpu":
        address = tpu or ""
        if address not in _TPU_STRATEGIES:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
            if tpu != "local":  # A TPU VM's own chips need no remote connection.
                tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            _TPU_STRATEGIES[address] = tf.distribute.TPUStrategy(resolver)
        return _TPU_STRATEGIES[address]
    raise ValueError(f"Unknown distribution strategy {name!r}; choose one of {STRATEGIES}.")


def _auto_tpu(tpu):
    return "local" if tpu is None else tpu


def auto_strategy_name(tpu=None):
    """ "tpu" if a TPU answers at `tpu` (None: "local"), else "mirrored" with two or more GPUs,
    else "default"."""
    try:
        get_strategy("tpu", _auto_tpu(tpu))
        return "tpu"
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        logging.info(
            "No TPU at %r (%s): using the GPUs or the CPU.", _auto_tpu(tpu), type(error).__name__
        )
    return "mirrored" if len(tf.config.list_physical_devices("GPU")) > 1 else "default"


def resolve_auto(strategy, tpu, mixed_precision):
    """The settings with "auto" replaced: a dict of `strategy`, `tpu` and `mixed_precision`
    (mixed_bfloat16 on TPU, mixed_float16 on GPUs, else none), for `dataclasses.replace`."""
    if strategy == "auto":
        strategy, tpu = auto_strategy_name(tpu), _auto_tpu(tpu)
    if mixed_precision == "auto":
        if strategy == "tpu":
            mixed_precision = "mixed_bfloat16"
        else:
            mixed_precision = "mixed_float16" if tf.config.list_physical_devices("GPU") else "none"
    return {"strategy": strategy, "tpu": tpu, "mixed_precision": mixed_precision}


def _check_tf_config():
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ValueError(
            "strategy multi_worker_mirrored needs the TF_CONFIG environment variable "
            '(e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
            '"task": {"type": "worker", "index": 0}}).'
        )
    try:
        config = json.loads(raw)
        config["cluster"]["worker"], config["task"]["index"]  # noqa: B018
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"TF_CONFIG is not a valid cluster description ({e}): {raw}") from e


def _multi_worker_resolver(strategy):
    """The cluster resolver of a multi-worker strategy, else None."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None
    return getattr(strategy, "cluster_resolver", None)


def is_chief(strategy):
    """True on the worker that writes checkpoints, summaries and plots."""
    resolver = _multi_worker_resolver(strategy)
    if resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type in (None, "chief") or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )


def worker_id(strategy):
    """The index of this worker (0 outside multi-worker training)."""
    resolver = _multi_worker_resolver(strategy)
    return 0 if resolver is None else resolver.task_id or 0


def adapt_keras_model(model, strategy):
    """Two work-arounds of Keras 3.15's TF trainer under tf.distribute (instance-level only).

    1. The model is built and has no compiled loss or metrics (its compute_loss and
       compute_metrics do the work), so Keras' symbolic build has
       nothing to do; it would still pull a batch and reduce it, which fails for multi-worker
       strategies (a dict of PerReplica values).
    2. Under MultiWorkerMirroredStrategy Keras reduces each step's logs with
       `strategy.reduce("MEAN", v, axis=0)`, which fails for scalars: the metrics (already
       synchronized over replicas) are returned with shape [1] instead.
    """
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        compute_metrics = model.compute_metrics
        model.compute_metrics = lambda *args, **kwargs: {
            name: tf.reshape(value, [1]) for name, value in compute_metrics(*args, **kwargs).items()
        }
