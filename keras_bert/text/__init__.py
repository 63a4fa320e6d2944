"""Text: in-graph WordPiece tokenization (tensorflow-text), vocabularies, input packing."""

from keras_bert.text.tokenizer import BertTokenizer  # noqa: E402
from keras_bert.text.vocab import load_vocabulary  # noqa: E402
