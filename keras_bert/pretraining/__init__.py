"""Pre-training: corpus to examples (static TFRecords, dynamic masking), data reading, the runner."""

# Data (corpus -> examples). The static writer: keras_bert.pretraining.create_pretraining_data.
from keras_bert.pretraining.corpus import read_documents, tfds_documents  # noqa: E402,F401
from keras_bert.pretraining.dynamic import dynamic_masking  # noqa: E402,F401
# Training (examples -> model): reading TFRecords; the runner is
# keras_bert.pretraining.runner.run_pretraining (its CLI: keras_bert.pretraining.run_pretraining).
from keras_bert.pretraining.records import make_dataset  # noqa: E402,F401
from keras_bert.pretraining.runner import PretrainingConfig  # noqa: E402,F401
