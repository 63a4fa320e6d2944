"""BERT models: the encoder and the pre-training models (the task models: `task_models`).

The names load on first use: `keras_bert.models.lora`, which the adapters format reads, imports
no model.
"""

from keras_bert._lazy import attach

_NAMES = {
    "BertEncoder": "keras_bert.models.encoder:BertEncoder",
    "BertPretrainer": "keras_bert.models.pretrainer:BertPretrainer",
    "ElectraPretrainer": "keras_bert.models.electra:ElectraPretrainer",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = attach(__name__, _NAMES)
