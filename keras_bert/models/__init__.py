"""BERT models: the encoder and the pre-training model."""

from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer

__all__ = ["BertEncoder", "BertPretrainer"]
