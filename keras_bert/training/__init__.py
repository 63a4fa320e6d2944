"""Training utilities: optimizers and schedules, distribution strategies, checkpoint/resume.

The names load on first use; `choices` (the names of strategies, optimizers and precisions)
imports without TensorFlow.
"""

from keras_bert._lazy import attach

_NAMES = {
    "CheckpointError": "keras_bert.training.checkpointing:CheckpointError",
    "TrainingCheckpoint": "keras_bert.training.checkpointing:TrainingCheckpoint",
    "get_strategy": "keras_bert.training.distribute:get_strategy",
    "WarmupLinearDecay": "keras_bert.training.optimizers:WarmupLinearDecay",
    "create_optimizer": "keras_bert.training.optimizers:create_optimizer",
    "OutOfMemoryError": "keras_bert.training.memory:OutOfMemoryError",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = attach(__name__, _NAMES)
