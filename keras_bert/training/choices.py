"""The names training settings choose from. Importable without TensorFlow: command lines list
them in --help and configs check them before anything heavy loads."""

# keras_bert.training.distribute; "auto": the TPU if one answers, else mirrored over 2+ GPUs, else default.
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu", "auto")
OPTIMIZERS = ("adamw", "lamb", "adam_weight_decay")  # keras_bert.training.optimizers
# Keras dtype policies ("none": float32); "auto": mixed_bfloat16 on TPU, mixed_float16 on GPU, else none.
PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16", "auto")
