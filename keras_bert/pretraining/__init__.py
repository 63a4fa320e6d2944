"""Pre-training: corpus to examples (static TFRecords, dynamic masking), data reading, the runner.

Data (corpus -> examples): the static writer is `static_records.create_pretraining_data` (its
command line: `keras_bert.pretraining.create_pretraining_data`). Training (examples -> model):
`records.make_dataset` reads the TFRecords; the runner is `runner.run_pretraining` with a
`PretrainingConfig` (its command line: `keras_bert.pretraining.pretrain`).
The names load on first use (helper processes and --help start without the runner).
"""

from keras_bert._lazy import attach

_NAMES = {
    "read_documents": "keras_bert.pretraining.corpus:read_documents",
    "tfds_documents": "keras_bert.pretraining.corpus:tfds_documents",
    "dynamic_masking": "keras_bert.pretraining.dynamic:dynamic_masking",
    "make_dataset": "keras_bert.pretraining.records:make_dataset",
    "PretrainingConfig": "keras_bert.pretraining.config:PretrainingConfig",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = attach(__name__, _NAMES)
