"""Keras layers of BERT: embeddings, Transformer block, pre-training heads, token pooling."""

from keras_bert.layers.embeddings import BertEmbeddings
from keras_bert.layers.heads import MaskedLMHead
from keras_bert.layers.pooling import MaskedMeanPooling
from keras_bert.layers.transformer import TransformerBlock

__all__ = ["BertEmbeddings", "MaskedLMHead", "MaskedMeanPooling", "TransformerBlock"]
