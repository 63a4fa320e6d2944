"""The names training settings choose from. Importable without TensorFlow: command lines list
them in --help and configs check them before anything heavy loads."""

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")  # keras_bert.training.distribute
OPTIMIZERS = ("adamw", "lamb", "adam_weight_decay")  # keras_bert.training.optimizers
PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")  # Keras dtype policies ("none": float32)
