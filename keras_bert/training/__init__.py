"""Training utilities: optimizers and schedules, distribution strategies, callbacks (checkpoints and
resume: `keras_bert.checkpoints.training`).

The names load on first use; `choices` (the names of strategies, optimizers and precisions)
imports without TensorFlow.
"""

from keras_bert._lazy import attach

_NAMES = {
    "get_strategy": "keras_bert.training.strategies:get_strategy",
    "WarmupLinearDecay": "keras_bert.training.optimizers:WarmupLinearDecay",
    "create_optimizer": "keras_bert.training.optimizers:create_optimizer",
    "OutOfMemoryError": "keras_bert.training.memory:OutOfMemoryError",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = attach(__name__, _NAMES)
