"""Keras layers of BERT: embeddings, Transformer block, pre-training heads."""

from keras_bert.layers.embeddings import BertEmbeddings
from keras_bert.layers.heads import MaskedLMHead
from keras_bert.layers.transformer import TransformerBlock

__all__ = ["BertEmbeddings", "MaskedLMHead", "TransformerBlock"]
