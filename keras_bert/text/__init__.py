"""Text: in-graph WordPiece tokenization (tensorflow-text), vocabularies, input packing.

The names load on first use (the vocabulary command line starts without TensorFlow).
"""

from keras_bert._lazy import attach

_NAMES = {
    "BertTokenizer": "keras_bert.text.tokenizer:BertTokenizer",
    "load_vocabulary": "keras_bert.text.vocab:load_vocabulary",
    "BertPacker": "keras_bert.text.packer:BertPacker",
    "BertPreprocessor": "keras_bert.text.preprocessor:BertPreprocessor",
    "build_vocabulary": "keras_bert.text.vocab_builder:build_vocabulary",
    "write_vocabulary": "keras_bert.text.vocab:write_vocabulary",
}
__all__ = list(_NAMES)
__getattr__, __dir__ = attach(__name__, _NAMES)
