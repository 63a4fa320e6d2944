"""The names training settings choose from. Importable without TensorFlow: command lines list
them in --help and configs check them before anything heavy loads."""

# keras_bert.training.strategies; "auto": the TPU if one answers, else mirrored over 2+ GPUs, else
# default.
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu", "auto")
# keras_bert.training.distribution (JAX's keras.distribution); "auto": data_parallel over 2+
# devices.
DISTRIBUTIONS = ("none", "data_parallel", "model_parallel", "auto")
OPTIMIZERS = ("adamw", "lamb", "adam_weight_decay")  # keras_bert.training.optimizers
# Keras dtype policies ("none": float32); "auto": mixed_bfloat16 on TPU, mixed_float16 on GPU, else
# none.
PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16", "auto")
# Pre-training objectives (keras_bert.pretraining.config): the paper's masked LM + next sentence,
# masked LM only (RoBERTa), + sentence order (ALBERT), replaced-token detection (ELECTRA).
OBJECTIVES = ("mlm_nsp", "mlm", "mlm_sop", "electra")


def check_settings(settings, at_least_one=()):
    """Raises ValueError naming a training setting of `settings` (a config object) that is not
    one of its choices (mixed_precision, optimizer, strategy, distribution) or, for
    `at_least_one` names, < 1."""
    for name, choices in (
        ("mixed_precision", PRECISIONS),
        ("optimizer", OPTIMIZERS),
        ("strategy", STRATEGIES),
        ("distribution", DISTRIBUTIONS),
    ):
        if getattr(settings, name, choices[0]) not in choices:
            raise ValueError(f"{name} must be one of {choices}, got {getattr(settings, name)!r}.")
    for name in at_least_one:
        if int(getattr(settings, name)) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(settings, name)}.")
