"""BertTokenizer: in-graph WordPiece tokenization with the original BERT's exact ids.

Dimension legend: B... any batch shape of the input strings, T tokens (ragged).
"""

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder

from keras_bert.text import normalize
from keras_bert.text.vocab import load_vocabulary

SUFFIX_INDICATOR = "##"
UNKNOWN_TOKEN = "[UNK]"
MAX_OP_TOKEN_BYTES = 256  # FastWordpiece's limit per vocabulary token.


@keras.saving.register_keras_serializable(package="keras_bert")
class BertTokenizer(keras.layers.Layer):
    """WordPiece tokenizer giving the ids of the original BERT `FullTokenizer`.

    Built on tensorflow-text's `FastBertTokenizer` (TFLite kernels exist for both of its
    ops), with the normalizer model compiled from the original's rules
    (`keras_bert.text.normalize`) instead of tensorflow-text's NFKC case folding, and the
    original's limit of `max_chars_per_word` characters per word (longer words become
    one [UNK]). It runs eagerly, in `tf.data`, in a Keras functional model, in a
    SavedModel signature and in TFLite.

    Defined behaviour on unusual input:
    - Invalid UTF-8: every ill-formed byte sequence is deleted, exactly as the original's
      `convert_to_unicode` does (`bytes.decode("utf-8", "ignore")`); never an error.
    - Empty or whitespace-only strings give no tokens; long texts (MBs) are fine.
    - Residual differences from the original (tested): uncased, a capital sigma at the
      end of a word is lower-cased to σ, not ς (see `keras_bert.text.normalize`); a
      vocabulary token over 256 UTF-8 bytes (the op's limit) is never matched.

    Args:
        vocabulary: list of tokens, or a vocab.txt path or model directory
            (see `load_vocabulary`). Must hold [PAD] [UNK] [CLS] [SEP] [MASK].
        lower_case: bool, True for uncased models (lower-case, NFD, strip accents).
        max_chars_per_word: int, longer words give [UNK] (google-research/bert: 200;
            its copy in tf-models-official: 400).

    Call arguments:
        texts: tf.string tensor (or ragged tensor) of any shape B..., UTF-8.

    Returns:
        int32 ragged ids [B..., (T)] (a dense [T] for a scalar input).

    Example:
    >>> tok = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "!"])
    >>> tok(tf.constant(["Hi!", "hi"])).to_list()
    [[5, 6], [5]]
    """

    def __init__(self, vocabulary, lower_case=True, max_chars_per_word=200, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self._convert_input_args = False  # Keep tf.string tensors as they are.
        self._allow_non_tensor_positional_args = True
        self.vocabulary = load_vocabulary(vocabulary)
        self.lower_case = bool(lower_case)
        self.max_chars_per_word = int(max_chars_per_word)
        self._index = {token: i for i, token in enumerate(self.vocabulary)}
        for name in ("pad", "unk", "cls", "sep", "mask"):
            setattr(self, f"{name}_id", self._index[f"[{name.upper()}]"])
        self._fast = _fast_bert_tokenizer(self.vocabulary, self.lower_case, self.max_chars_per_word)
        self._restore = None  # Maps the op's stand-in characters back, if any token has one.
        if normalize.op_vocabulary(self.vocabulary) != self.vocabulary:
            self._restore = tf_text.FastBertNormalizer(
                model_buffer=_uint8_constant(normalize.build_restore_buffer()))
        suffix = [t.startswith(SUFFIX_INDICATOR) and t != SUFFIX_INDICATOR for t in self.vocabulary]
        chars = [len(t) - 2 if s else len(t) for t, s in zip(self.vocabulary, suffix)]
        self._is_suffix = tf.constant(suffix, tf.bool)  # [V]
        self._num_chars = tf.constant(chars, tf.int32)  # [V]
        self.built = True

    # === Vocabulary ===

    @property
    def vocab_size(self):
        return len(self.vocabulary)

    def token_to_id(self, token):
        """Returns the id of `token`; KeyError if it is not in the vocabulary."""
        if token not in self._index:
            raise KeyError(f"Token {token!r} is not in the vocabulary.")
        return self._index[token]

    def id_to_token(self, token_id):
        """Returns the token of `token_id`; IndexError if out of [0, vocab_size)."""
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise IndexError(f"Token id {token_id} out of range [0, {self.vocab_size}).")
        return self.vocabulary[token_id]

    # === Tokenization ===

    def call(self, texts):
        return self._tokenize(texts, with_offsets=False)[0]

    def tokenize_with_offsets(self, texts):
        """Tokenizes and returns each token's byte span in the input string.

        Args:
            texts: tf.string tensor of shape B...

        Returns:
            (ids, starts, ends): int32 ids and int64 byte offsets [B..., (T)]; a word
            turned into [UNK] spans the whole word. Tokens from a character whose
            normalized form is several characters all span that character.
        """
        return self._tokenize(texts, with_offsets=True)

    def detokenize(self, ids):
        """Joins ids [B..., (T)] back into strings [B...]: words separated by spaces,
        "##" pieces glued to their word (lower-cased and split as tokenized)."""
        ids = tf.cast(_as_tensor(ids, tf.int32), tf.int32)
        strings = self._fast.detokenize(ids)
        if self._restore is not None:
            strings = self._restore.normalize(strings)
        return strings

    def _tokenize(self, texts, with_offsets):
        texts = _as_tensor(texts, tf.string)
        if isinstance(texts, tf.RaggedTensor):
            flat = texts.flat_values
        else:
            flat = tf.reshape(texts, [-1])
        # Tokenize the flat list: [N, (T)].
        if with_offsets:
            ids, starts, ends = self._fast.tokenize_with_offsets(flat)
            outputs = _limit_word_length(
                ids, self._is_suffix, self._num_chars, self.max_chars_per_word, self.unk_id,
                starts, ends)
        else:
            ids = self._fast.tokenize(flat)
            outputs = _limit_word_length(
                ids, self._is_suffix, self._num_chars, self.max_chars_per_word, self.unk_id)
        return tuple(_restore_shape(t, texts) for t in outputs)

    def compute_output_spec(self, texts):
        shape = tuple(texts.shape) + (None,)
        return keras.KerasTensor(shape, dtype="int32", ragged=True)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary=list(self.vocabulary),
            lower_case=self.lower_case,
            max_chars_per_word=self.max_chars_per_word,
        )
        return config


def _op_vocabulary(vocabulary):
    """The tokens as the op takes them: stand-in characters (see `normalize`), and a
    placeholder that matches nothing for tokens over the op's 256 bytes (without "##");
    such a token could only match a word of 256+ bytes."""
    tokens = normalize.op_vocabulary(vocabulary)
    for i, token in enumerate(tokens):
        if len(token.removeprefix(SUFFIX_INDICATOR).encode("utf-8")) > MAX_OP_TOKEN_BYTES:
            tokens[i] = f"[unmatchable_{i}]"  # "[" is punctuation: never inside a word.
    return tokens


def _fast_bert_tokenizer(vocabulary, lower_case, max_chars_per_word):
    # Words over 4 bytes per character surely exceed the limit: the op makes them [UNK];
    # shorter ones are checked in characters by `_limit_word_length`.
    wordpiece_model = pywrap_fast_wordpiece_tokenizer_model_builder.build_fast_wordpiece_model(
        _op_vocabulary(vocabulary), 4 * max_chars_per_word, SUFFIX_INDICATOR, UNKNOWN_TOKEN, False, True)
    return tf_text.FastBertTokenizer(
        token_out_type=tf.int32,
        fast_wordpiece_model_buffer=_uint8_constant(wordpiece_model),
        fast_bert_normalizer_model_buffer=_uint8_constant(
            normalize.build_model_buffer(lower_case)),
    )


def _uint8_constant(buffer):
    return tf.constant(np.frombuffer(buffer, np.uint8))


def _as_tensor(x, dtype):
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x
    if isinstance(x, (list, tuple)) and dtype == tf.int32:
        return tf.ragged.constant(x, dtype)
    return tf.convert_to_tensor(x, dtype)


def _limit_word_length(ids, is_suffix, num_chars, max_chars, unk_id, starts=None, ends=None):
    """Replaces the pieces of each word longer than `max_chars` by one [UNK].

    ids (and starts, ends): ragged [N, (T)]. A word is a non-suffix piece followed by its
    "##" pieces; its length is the sum of the pieces' characters.
    """
    pieces = ids.flat_values  # [M]
    is_start = tf.logical_not(tf.gather(is_suffix, pieces))  # [M]
    word = tf.cumsum(tf.cast(is_start, tf.int32)) - 1  # [M] word index of each piece
    num_words = tf.reduce_sum(tf.cast(is_start, tf.int32))
    word_chars = tf.math.unsorted_segment_sum(tf.gather(num_chars, pieces), word, num_words)
    too_long = tf.gather(word_chars, word) > max_chars  # [M]
    keep = tf.logical_or(is_start, tf.logical_not(too_long))  # [M]
    # int32 segment sums: TFLite's builtin kernels have no int64 variant.
    row_lengths = tf.math.unsorted_segment_sum(
        tf.cast(keep, tf.int32), tf.cast(ids.value_rowids(), tf.int32),
        tf.cast(ids.nrows(), tf.int32))  # [N]
    row_lengths = tf.cast(row_lengths, ids.row_splits.dtype)

    def rebuild(values):
        return tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(values, keep), row_lengths, validate=False)

    outputs = [rebuild(tf.where(too_long, tf.cast(unk_id, pieces.dtype), pieces))]
    if starts is not None:
        word_end = tf.math.unsorted_segment_max(ends.flat_values, word, num_words)
        long_end = tf.where(too_long, tf.gather(word_end, word), ends.flat_values)
        outputs += [rebuild(starts.flat_values), rebuild(long_end)]
    return outputs


def _restore_shape(tokens, texts):
    """[N, (T)] tokens of the flattened texts -> [B..., (T)] (texts' shape B...)."""
    if isinstance(texts, tf.RaggedTensor):
        return texts.with_flat_values(tokens)
    rank = texts.shape.rank
    if rank == 0:
        return tokens[0]
    if rank == 1:
        return tokens
    shape = tf.shape(texts, out_type=tokens.row_splits.dtype)
    for axis in range(rank - 1, 0, -1):
        tokens = tf.RaggedTensor.from_uniform_row_length(tokens, shape[axis], validate=False)
    return tokens
