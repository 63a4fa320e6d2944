"""`TrainingSettings`: the fields every training run has, and the command-line flags made from
them. Pre-training (`keras_bert.pretraining.config.PretrainingConfig`) and fine-tuning
(`keras_bert.tasks.config.FinetuneConfig`) extend it with their own fields. Light: command lines
define their flags from these dataclasses and check settings before TensorFlow loads.
"""

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from absl import flags

from keras_bert import cli, paths
from keras_bert.training.choices import (
    DISTRIBUTIONS,
    OBJECTIVES,
    OPTIMIZERS,
    PRECISIONS,
    STRATEGIES,
    check_settings,
)

# Flag choices (enum flags) by field name.
CHOICES: dict[str, tuple[str, ...]] = {
    "strategy": STRATEGIES,
    "distribution": DISTRIBUTIONS,
    "mixed_precision": PRECISIONS,
    "optimizer": OPTIMIZERS,
    "objective": OBJECTIVES,
}
# The --help lines of the shared fields; a config's own fields get theirs from its command line.
FLAG_HELP: dict[str, str] = {
    "model_dir": "Run directory: checkpoints, TensorBoard logs, plot, summary.json.",
    "init_checkpoint": (
        "Google TF1 checkpoint, Hugging Face directory or another run's model_dir to start from."
    ),
    "model": "BertConfig preset: tiny mini small medium base large, L-x_H-y.",
    "vocab_file": "A vocab.txt (default: the init_checkpoint's).",
    "lower_case": (
        "Casing of the tokenization (--lower_case: uncased; default: the init_checkpoint's)."
    ),
    "batch_size": "Global batch size of one update step (all replicas).",
    "eval_batch_size": "Batch size of evaluation (default: batch_size).",
    "seq_length": "Tokens per sequence.",
    "learning_rate": "Peak learning rate.",
    "optimizer": "Optimizer.",
    "weight_decay": "Decoupled weight decay (not on LayerNorm and bias).",
    "clip_norm": "Global gradient norm clipping (0 for none).",
    "strategy": "tf.distribute strategy (TensorFlow backend).",
    "distribution": (
        "keras.distribution over the devices (JAX backend, KERAS_BACKEND=jax): data_parallel, "
        "model_parallel (encoder kernels split over model_parallel_devices), auto."
    ),
    "model_parallel_devices": "Devices a kernel is split over (--distribution model_parallel).",
    "tpu": "TPU name or address for --strategy tpu ('local' on a TPU VM).",
    "mixed_precision": "Precision policy.",
    "jit_compile": "Compile the train step with XLA.",
    "steps_per_loop": "Update steps per logging loop (default: automatic).",
    "checkpoint_every": "Update steps between checkpoints.",
    "keep_checkpoints": "Checkpoints kept.",
    "seed": "Seeds weights, dropout and data order.",
    "verbose": "Show a progress bar.",
    "plot": "Write the training-curve PNG.",
}
_FLAG_TYPES: dict[type, Callable[..., Any]] = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
}


@dataclasses.dataclass
class TrainingSettings:
    """The settings every training run has (the command-line flags have the same names).

    Args:
        model_dir: str. The run directory (checkpoints, TensorBoard logs, plot, summary.json).
        init_checkpoint: str or None. A Google TF1 checkpoint, a Hugging Face directory or the
            model_dir of a pre-training run to start from; its vocabulary and casing are used
            unless vocab_file / lower_case are given.
        model: str or None. A `BertConfig` preset name ("tiny" ... "large", "L-4_H-256").
        vocab_file: str or None. A vocab.txt. lower_case: bool or None (None: from the checkpoint).
        batch_size: int. GLOBAL batch size of one update step (all replicas).
        eval_batch_size: int or None. Batch size of the evaluation (default batch_size).
        seq_length: int. Tokens per sequence.
        learning_rate: float. Peak learning rate.
        optimizer: "adamw", "lamb" or "adam_weight_decay" (the original BERT optimizer).
        weight_decay: float. Decoupled weight decay (not on LayerNorm and bias).
        clip_norm: float. Global gradient norm clipping (0 for none).
        strategy: "default", "mirrored", "multi_worker_mirrored", "tpu" or "auto".
        tpu: str or None. TPU name or address for strategy "tpu".
        distribution: the JAX backend's `keras.distribution`: "none", "data_parallel",
            "model_parallel" or "auto" (`keras_bert.training.distribution`).
        model_parallel_devices: int. Devices on the model axis of "model_parallel".
        mixed_precision: "none", "mixed_float16" (with dynamic loss scaling), "mixed_bfloat16"
            or "auto".
        jit_compile: bool. Compile the train step with XLA.
        steps_per_loop: int or None. Update steps per logging loop (None: automatic).
        checkpoint_every: int or None. Update steps between checkpoints.
        keep_checkpoints: int. Checkpoints kept.
        seed: int. Seeds weights, dropout and data order.
        verbose: bool. Progress bar.
        plot: bool. Write the training-curve PNG.
    """

    model_dir: str | None = None
    init_checkpoint: str | None = None
    model: str | None = None
    vocab_file: str | None = None
    lower_case: bool | None = None
    batch_size: int | None = None
    eval_batch_size: int | None = None
    seq_length: int | None = None
    learning_rate: float | None = None
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    strategy: str = "default"
    tpu: str | None = None
    distribution: str = "none"
    model_parallel_devices: int = 2
    mixed_precision: str = "none"
    jit_compile: bool = False
    steps_per_loop: int | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int = 2
    seed: int = 0
    verbose: bool = True
    plot: bool = True

    def check_training_settings(self, at_least_one: Iterable[str] = ()) -> None:
        """Raises ValueError naming a setting that is not one of its choices, or, of the
        `at_least_one` names (keep_checkpoints always), one below 1."""
        check_settings(self, at_least_one=("keep_checkpoints", *at_least_one))

    def check_paths(self) -> None:
        """Raises FileNotFoundError naming a local input path that does not exist (the runners
        call it first; the command lines before TensorFlow loads)."""
        paths.require_path("init_checkpoint", self.init_checkpoint, paths.INIT_CHECKPOINT_KINDS)
        paths.require_path("vocab_file", self.vocab_file, "a vocab.txt, or a directory holding one")

    @property
    def dtype(self) -> str:
        """The Keras dtype policy of `mixed_precision` ("float32" for "none")."""
        return "float32" if self.mixed_precision == "none" else self.mixed_precision


def flag_fields(settings_class: type) -> list[dataclasses.Field[Any]]:
    """The fields of `settings_class` that are command-line flags (bool, int, float, str)."""
    return [f for f in dataclasses.fields(settings_class) if _flag_type(f) is not None]


def flag_definer(field: dataclasses.Field[Any]) -> Callable[..., Any]:
    """The absl DEFINE function of a dataclass field's type (bool, int, float, str)."""
    return _FLAG_TYPES[typing.cast(type, _flag_type(field))]  # KeyError for another type.


def _flag_type(field: dataclasses.Field[Any]) -> type | None:
    """bool, int, float or str for a field of that type or of that type `| None`, else None."""
    kind = field.type
    if isinstance(kind, types.UnionType):
        kinds = [k for k in typing.get_args(kind) if k is not type(None)]
        kind = kinds[0] if len(kinds) == 1 else None
    return kind if kind in _FLAG_TYPES else None


def define_flags(settings_class: type, help_text: dict[str, str] | None = None) -> None:
    """Defines one flag per field of `settings_class` (name, type and default of the field;
    enum flags for `CHOICES`), again on each call (see `keras_bert.cli.define`).

    Args:
        settings_class: a `TrainingSettings` dataclass.
        help_text: dict field name -> --help line for the fields `FLAG_HELP` lacks or says
            otherwise; the rest read "<Class>.<field>.".
    """
    help_text = {**FLAG_HELP, **(help_text or {})}
    for field in flag_fields(settings_class):
        text = help_text.get(field.name, f"{settings_class.__name__}.{field.name}.")
        if field.name in CHOICES:
            cli.define(flags.DEFINE_enum, field.name, field.default, CHOICES[field.name], text)
        else:
            cli.define(flag_definer(field), field.name, field.default, text)


def flag_values(settings_class: type) -> dict[str, Any]:
    """The parsed flags of `define_flags(settings_class)` as a dict field name -> value."""
    return {f.name: flags.FLAGS[f.name].value for f in flag_fields(settings_class)}
