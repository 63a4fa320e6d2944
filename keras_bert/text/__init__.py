"""Text: in-graph WordPiece tokenization (tensorflow-text), vocabularies, input packing."""

from keras_bert.text.tokenizer import BertTokenizer  # noqa: E402
from keras_bert.text.vocab import load_vocabulary  # noqa: E402
from keras_bert.text.packer import BertPacker  # noqa: E402
from keras_bert.text.preprocessor import BertPreprocessor  # noqa: E402
from keras_bert.text.vocab_builder import build_vocabulary, write_vocabulary  # noqa: E402
