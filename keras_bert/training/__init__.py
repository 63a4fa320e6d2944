"""Training utilities: optimizers and schedules, distribution strategies, checkpoint/resume."""

from keras_bert.training.checkpointing import CheckpointError, TrainingCheckpoint  # noqa: E402,F401
from keras_bert.training.distribute import get_strategy  # noqa: E402,F401
from keras_bert.training.optimizers import WarmupLinearDecay, create_optimizer  # noqa: E402,F401
