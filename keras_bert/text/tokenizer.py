"""BertTokenizer: in-graph WordPiece tokenization with the original BERT's exact ids.

Dimension legend: B... any batch shape of the input strings, T tokens (ragged).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder
from tensorflow_text.python.ops.ngrams_op import gen_ngrams_op  # The op with a TFLite kernel.

from keras_bert.text import normalize
from keras_bert.text.vocab import load_vocabulary

SUFFIX_INDICATOR = "##"
UNKNOWN_TOKEN = "[UNK]"
MAX_OP_TOKEN_BYTES = 256  # FastWordpiece's limit per vocabulary token.


@keras.saving.register_keras_serializable(package="keras_bert")
class BertTokenizer(keras.layers.Layer):
    """WordPiece tokenizer giving the ids of the original BERT `FullTokenizer`.

    Built on the two ops of tensorflow-text's `FastBertTokenizer` (FastBertNormalize and
    FastWordpieceTokenize, both with TFLite kernels), with the normalizer model compiled
    from the original's rules (`keras_bert.text.normalize`) instead of tensorflow-text's
    NFKC case folding, and the original's limit of `max_chars_per_word` characters per
    word (longer words become one [UNK]). It runs eagerly, in `tf.data`, in a Keras
    functional model, in a SavedModel signature and in TFLite (builtins + tf-text ops).

    Defined behaviour on unusual input:
    - Invalid UTF-8: every ill-formed byte sequence is deleted, exactly as the original's
      `convert_to_unicode` does (`bytes.decode("utf-8", "ignore")`); never an error.
    - Empty or whitespace-only strings give no tokens; long texts (MBs) are fine.
    - Uncased, capital sigma becomes ς or σ by its context as in `str.lower`
      (`FinalSigma`, a second graph path taken only by the texts holding a Σ).
    - Residual differences from the original (tested): a vocabulary token over 256 UTF-8
      bytes (the op's limit) is never matched; a word with more than 16 capital sigmas;
      see also `keras_bert.text.normalize`.

    Args:
        vocabulary: list of tokens, or a vocab.txt path or model directory
            (see `load_vocabulary`). Must hold `[PAD] [UNK] [CLS] [SEP] [MASK]`.
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

    def __init__(
        self,
        vocabulary: Sequence[str] | str | os.PathLike[str],
        lower_case: bool = True,
        max_chars_per_word: int = 200,
        **kwargs: Any,
    ) -> None:
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
        self._wordpiece = _wordpiece_op(self.vocabulary, self.max_chars_per_word)
        self._normalizer = tf_text.FastBertNormalizer(
            model_buffer=_uint8_constant(normalize.build_model_buffer(self.lower_case))
        )
        self._final_sigma = FinalSigma(self._wordpiece) if self.lower_case else None
        self._restore = None  # Maps the op's stand-in characters back, if any token has one.
        if normalize.op_vocabulary(self.vocabulary) != self.vocabulary:
            self._restore = tf_text.FastBertNormalizer(
                model_buffer=_uint8_constant(normalize.build_restore_buffer())
            )
        suffix = [t.startswith(SUFFIX_INDICATOR) and t != SUFFIX_INDICATOR for t in self.vocabulary]
        chars = [len(t) - 2 if s else len(t) for t, s in zip(self.vocabulary, suffix)]
        self._is_suffix = tf.constant(suffix, tf.bool)  # [V]
        self._num_chars = tf.constant(chars, tf.int32)  # [V]
        self.built = True

    # === Vocabulary ===

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def token_to_id(self, token: str) -> int:
        """Returns the id of `token`; KeyError if it is not in the vocabulary."""
        if token not in self._index:
            raise KeyError(f"Token {token!r} is not in the vocabulary.")
        return self._index[token]

    def id_to_token(self, token_id: int) -> str:
        """Returns the token of `token_id`; IndexError if out of [0, vocab_size)."""
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise IndexError(f"Token id {token_id} out of range [0, {self.vocab_size}).")
        return self.vocabulary[token_id]

    # === Tokenization ===

    def call(self, texts: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        return self._tokenize(texts, with_offsets=False)[0]

    def tokenize_with_offsets(
        self, texts: tf.Tensor | tf.RaggedTensor
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
        """Tokenizes and returns each token's byte span in the input string.

        Args:
            texts: tf.string tensor of shape B...

        Returns:
            (ids, starts, ends): int32 ids and int64 byte offsets [B..., (T)]; a word
            turned into [UNK] spans the whole word. Tokens from a character whose
            normalized form is several characters all span that character.
        """
        return self._tokenize(texts, with_offsets=True)

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor | Sequence[Any]) -> tf.Tensor:
        """Joins ids [B..., (T)] back into strings [B...]: words separated by spaces,
        "##" pieces glued to their word (lower-cased and split as tokenized)."""
        ids = tf.cast(_as_tensor(ids, tf.int32), tf.int32)
        strings = self._wordpiece.detokenize(ids)
        if self._restore is not None:
            strings = self._restore.normalize(strings)
        return strings

    def _tokenize(self, texts, with_offsets):
        texts = _as_tensor(texts, tf.string)
        if isinstance(texts, tf.RaggedTensor):
            flat = texts.flat_values
        else:
            flat = tf.reshape(texts, [-1])
        # Tokenize the flat list: [N, (T)] ids (and offsets).
        outputs = self._tokenize_flat(flat, with_offsets)
        if self._final_sigma is not None:  # Texts with a capital sigma take the final-sigma path.
            outputs = self._with_final_sigma(flat, outputs, with_offsets)
        outputs = _limit_word_length(
            outputs, self._is_suffix, self._num_chars, self.max_chars_per_word, self.unk_id
        )
        return tuple(_restore_shape(t, texts) for t in outputs)

    def _with_final_sigma(self, flat, outputs, with_offsets):
        """`outputs` (`_tokenize_flat(flat)`) with the texts holding a capital sigma tokenized
        by the final-sigma path instead.

        Two nested conds, for TFLite, where each IF prepares both of its branches (a cost per
        op, on every call): the outer one's true branch starts with a byte split, whose output
        shape is known only when it runs, so its preparation stops there and the inner IF, with
        the final-sigma path's 300 ops, is prepared only for texts that need it. The plain path
        runs outside both (the false branches pass it through). The conds also keep the
        final-sigma ops away from empty inputs (TFLite)."""

        def split_by_sigma(has_sigma):
            parts = []
            for mask, tokenize in (
                (has_sigma, self._final_sigma.tokenize),
                (tf.logical_not(has_sigma), self._tokenize_flat),
            ):
                index = tf.cast(tf.where(mask)[:, 0], tf.int32)
                parts.append((index, tokenize(tf.gather(flat, index), with_offsets)))
            return _flatten(_merge_rows(parts, tf.shape(flat)[0]))

        def plain():  # Passes the plain path's outputs through (an op-less branch).
            return _flatten(outputs)

        def sigma_path():
            has_sigma = _sigma_positions(flat)[2] > 0  # [N]
            return tf.cond(tf.reduce_any(has_sigma), lambda: split_by_sigma(has_sigma), plain)

        splits, *values = tf.cond(_any_sigma(flat), sigma_path, plain)
        return [tf.RaggedTensor.from_row_splits(v, splits, validate=False) for v in values]

    def _tokenize_flat(self, flat, with_offsets):
        if not with_offsets:
            return [self._wordpiece.tokenize(self._normalizer.normalize(flat))]
        norm, norm_offsets = self._normalizer.normalize_with_offsets(flat)
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(norm)
        return [
            ids,
            _to_input_offsets(norm_offsets, ids, starts.flat_values),
            _to_input_offsets(norm_offsets, ids, ends.flat_values),
        ]

    def compute_output_spec(self, texts: keras.KerasTensor) -> keras.KerasTensor:
        shape = tuple(texts.shape) + (None,)
        return keras.KerasTensor(shape, dtype="int32", ragged=True)

    @classmethod
    def from_preset(cls, preset: Any, **kwargs: Any) -> BertTokenizer:
        """The tokenizer of a preset (`keras_bert.presets`), built as `cls`: its vocabulary and
        casing; kwargs override (lower_case=..., max_chars_per_word=...)."""
        from keras_bert.checkpoints import from_preset

        return from_preset.load_tokenizer(cls, preset, **kwargs)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            vocabulary=list(self.vocabulary),
            lower_case=self.lower_case,
            max_chars_per_word=self.max_chars_per_word,
        )
        return config


class FinalSigma:
    """Uncased tokenization with `str.lower`'s final-sigma rule, from TFLite-ready ops.

    The original lower-cases each whitespace-separated word with `str.lower`, which turns
    U+03A3 into ς where the nearest non-case-ignorable character before it is cased and
    the one after it is not, else into σ. A per-character normalizer cannot see that
    context, so texts holding a capital sigma are normalized with Σ kept
    and split at spaces; each word holding a Σ reads its context from a class normalizer
    and is rebuilt from byte ranges of a copy where Σ is "σς" (the σ or the ς half per
    Σ, joined with tf-text's ngram string join); words are tokenized and their rows
    merged back in order. Words with more than `MAX_SIGMAS` capital sigmas keep "σς"
    for the extra ones (a documented residual).
    """

    MAX_SIGMAS = 16

    def __init__(self, wordpiece):
        self.wordpiece = wordpiece  # FastWordpieceTokenizer (end-to-end).
        self.keep = tf_text.FastBertNormalizer(
            model_buffer=_uint8_constant(normalize.build_model_buffer(True, "\u03a3"))
        )
        self.pair = tf_text.FastBertNormalizer(
            model_buffer=_uint8_constant(normalize.build_map_buffer(((0x3A3, "\u03c3\u03c2"),)))
        )
        self.classes = tf_text.FastBertNormalizer(
            model_buffer=_uint8_constant(normalize.build_case_class_buffer())
        )

    def tokenize(self, texts, with_offsets):
        """Flat texts [N] -> [ids] or [ids, starts, ends], ragged [N, (T)]."""
        norm, norm_offsets = self.keep.normalize_with_offsets(texts)  # [N], [N, (L+1)]
        words, word_starts, _ = tf_text.WhitespaceTokenizer().tokenize_with_offsets(norm)
        flat_words = words.flat_values  # [W]
        has_sigma = _sigma_positions(flat_words)[2] > 0  # [W]
        parts = []  # Words with a Σ get the rule; the others go straight to the op.
        for mask, rule in ((has_sigma, True), (tf.logical_not(has_sigma), False)):
            index = tf.cast(tf.where(mask)[:, 0], tf.int32)
            subset = tf.gather(flat_words, index)
            if rule:
                subset = self._apply_rule(subset)
            if with_offsets:
                parts.append((index, list(self.wordpiece.tokenize_with_offsets(subset))))
            else:
                parts.append((index, [self.wordpiece.tokenize(subset)]))
        ids, *offsets = _merge_rows(parts, tf.shape(flat_words)[0])  # [W, (T)], in words
        per_text = _per_text(ids, words.row_splits)
        if not with_offsets:
            return [per_text]
        word_start = tf.gather(word_starts.flat_values, row_ids(ids))
        # (Words past MAX_SIGMAS capital sigmas come out longer: offsets are clamped.)
        return [per_text] + [
            _to_input_offsets(norm_offsets, per_text, v.flat_values + tf.cast(word_start, v.dtype))
            for v in offsets
        ]

    def _apply_rule(self, words):
        """Words [W] with Σ kept -> the same words with each Σ lower-cased as `str.lower`."""
        # Is each Σ final? Classes: C cased, S sigma, N other; case-ignorables deleted.
        classes = tf_text.ByteSplitter().split(self.classes.normalize(words))  # [W, (k)]
        cls = tf.cast(classes.flat_values, tf.int32)
        rows = row_ids(classes)
        cased = (cls == ord(normalize.CASED)) | (cls == ord(normalize.SIGMA))
        prev_ok = tf.concat([[False], cased], 0)[:-1] & (tf.concat([[-1], rows], 0)[:-1] == rows)
        next_cased = tf.concat([cased, [False]], 0)[1:] & (tf.concat([rows, [-1]], 0)[1:] == rows)
        is_sigma = cls == ord(normalize.SIGMA)
        final = tf.cast(tf.boolean_mask(prev_ok & ~next_cased, is_sigma), tf.int32)  # [nΣ]
        # Byte position of each Σ (CE A3) in its word, in the same order.
        position, word, count, row_starts = _sigma_positions(words)
        num_words = tf.shape(words)[0]

        # Slot of each Σ in its word; those past MAX_SIGMAS are dropped.
        first = tf.cumsum(count, exclusive=True)  # [W] index of each word's first Σ
        slot = tf.range(tf.size(word)) - tf.gather(first, word)
        keep = slot < self.MAX_SIGMAS
        where = tf.boolean_mask(tf.stack([word, slot], 1), keep)

        def dense(values):  # [nΣ] -> [W, MAX_SIGMAS]
            return tf.scatter_nd(
                where, tf.boolean_mask(values, keep), tf.stack([num_words, self.MAX_SIGMAS])
            )

        j = tf.range(self.MAX_SIGMAS)[None, :]  # [1, J]
        used = j < tf.minimum(count, self.MAX_SIGMAS)[:, None]  # [W, J]
        pair_length = (row_starts[1:] - row_starts[:-1] + 2 * count)[:, None]  # [W, 1]
        pair_pos = dense(position) + 2 * j  # Σ -> "σς": 2 more bytes per earlier Σ.
        half = tf.where(used, pair_pos + 2 * dense(final), pair_length)  # σ or ς half
        seg_start = tf.concat(
            [tf.zeros_like(pair_length), tf.where(used, pair_pos + 4, pair_length)], 1
        )
        seg_end = tf.concat([tf.where(used, pair_pos, pair_length), pair_length], 1)  # [W, J+1]
        width = 2 * self.MAX_SIGMAS + 1

        def interleave(segments, halves):  # [W, J+1], [W, J] -> [W, 2J+1]
            pairs = tf.reshape(tf.stack([segments[:, :-1], halves], 2), [-1, 2 * self.MAX_SIGMAS])
            return tf.concat([pairs, segments[:, -1:]], 1)

        pieces = tf_text.ByteSplitter().split_by_offsets(
            self.pair.normalize(words),
            interleave(seg_start, half),
            interleave(seg_end, tf.where(used, half + 2, pair_length)),
        )  # [W, 2J+1]
        # One ngram of the whole row; the ragged variant of the op (its dense one crashes).
        joined, _ = gen_ngrams_op.tf_text_ngrams_string_join(
            input_values=pieces.flat_values,
            input_row_splits=[pieces.row_splits],
            width=width,
            axis=-1,
            string_separator="",
        )
        return joined  # [W]


def _flatten(outputs):
    """Ragged tensors sharing row splits -> [row splits, values...] (for tf.cond)."""
    return [outputs[0].row_splits] + [t.flat_values for t in outputs]


def _segment_sum(data, segments, num_segments):
    """unsorted_segment_sum, with at least one segment (TFLite rejects empty outputs)."""
    return tf.math.unsorted_segment_sum(data, segments, tf.maximum(num_segments, 1))[:num_segments]


def _any_sigma(texts):
    """bool scalar: does any of the texts [N] hold a capital sigma (bytes CE A3 in one text)?
    `_sigma_positions(texts)[2] > 0` reduced, in half the ops."""
    split = tf_text.ByteSplitter().split(texts)  # [N, (b)]
    size = tf.size(split.flat_values)
    data = tf.concat([[0], tf.cast(split.flat_values, tf.int32), [0]], 0)  # [L + 2]: no empty
    # At each text's first byte but the first text's, >= 1: a pair across it is no sigma.
    starts = tf.cast(split.row_splits[1:-1], tf.int32)
    boundary = tf.math.unsorted_segment_max(tf.ones_like(starts), starts, size + 1)  # [L + 1]
    pair = (data[:-1] == 0xCE) & (data[1:] == 0xA3) & (boundary <= 0)  # [L + 1] byte i - 1, i
    return tf.reduce_any(pair)


def _sigma_positions(words):
    """Capital sigmas (bytes CE A3) in words [W]: byte position [nΣ] in its word, word
    index [nΣ], count per word [W], and the words' byte row starts [W+1]."""
    split = tf_text.ByteSplitter().split(words)  # [W, (b)]
    data = tf.cast(split.flat_values, tf.int32)
    rows = row_ids(split)
    at = (data == 0xCE) & (tf.concat([data, [0]], 0)[1:] == 0xA3)
    at &= tf.concat([rows, [-1]], 0)[1:] == rows
    index = tf.cast(tf.where(at)[:, 0], tf.int32)
    word = tf.gather(rows, index)
    row_starts = tf.cast(split.row_splits, tf.int32)
    count = _segment_sum(tf.cast(at, tf.int32), rows, tf.shape(words)[0])
    return index - tf.gather(row_starts, word), word, count, row_starts


def row_ids(ragged):
    """int32 row of each value of a 2-D ragged tensor: `value_rowids` in memory linear in the
    values (TF's goes through tf.repeat, whose dense tile is rows x longest row: 9 GB for a
    batch of 1,000 texts with one of 1 MB) and with TFLite builtins only."""
    splits = tf.cast(ragged.row_splits, tf.int32)
    starts = tf.math.unsorted_segment_sum(
        tf.ones_like(splits[1:-1]), splits[1:-1], tf.size(ragged.flat_values) + 1
    )
    return tf.cumsum(starts[:-1])


def _merge_rows(parts, num_rows):
    """Interleaves the rows of ragged parts back into one order (numeric ops only).

    Args:
        parts: list of (index [k], tensors): each tensor ragged [k, (T)], all sharing row
            splits; row i of a part goes to row index[i] of the result.
        num_rows: int32 scalar, the number of result rows (each in exactly one part).

    Returns:
        list of ragged [num_rows, (T)], one per tensor of a part.
    """
    lengths = tf.zeros([num_rows], tf.int32)
    source_start = tf.zeros([num_rows], tf.int32)
    offset = 0
    for index, tensors in parts:
        splits = tf.cast(tensors[0].row_splits, tf.int32)
        shape = tf.reshape(num_rows, [1])
        lengths += tf.scatter_nd(index[:, None], splits[1:] - splits[:-1], shape)
        source_start += tf.scatter_nd(index[:, None], splits[:-1] + offset, shape)
        offset += splits[-1]
    merged = tf.RaggedTensor.from_row_lengths(
        tf.zeros([tf.reduce_sum(lengths)], tf.int32), tf.cast(lengths, tf.int64), validate=False
    )
    rows = row_ids(merged)
    source = (
        tf.gather(source_start, rows)
        + tf.range(tf.size(rows))
        - tf.gather(tf.cast(merged.row_splits, tf.int32), rows)
    )
    return [
        merged.with_flat_values(
            tf.gather(tf.concat([tensors[i].flat_values for _, tensors in parts], 0), source)
        )
        for i in range(len(parts[0][1]))
    ]


def _per_text(ids, word_splits):
    """Ids of words [W, (T)] -> of texts [N, (T)], given the words' row splits [N+1]."""
    return tf.RaggedTensor.from_row_splits(ids, word_splits, validate=False).merge_dims(1, 2)


def _op_vocabulary(vocabulary):
    """The tokens as the op takes them: stand-in characters (see `normalize`), and a
    placeholder that matches nothing for tokens over the op's 256 bytes (without "##");
    such a token could only match a word of 256+ bytes."""
    tokens = normalize.op_vocabulary(vocabulary)
    for i, token in enumerate(tokens):
        if len(token.removeprefix(SUFFIX_INDICATOR).encode("utf-8")) > MAX_OP_TOKEN_BYTES:
            tokens[i] = f"[unmatchable_{i}]"  # "[" is punctuation: never inside a word.
    return tokens


def _wordpiece_op(vocabulary, max_chars_per_word):
    """FastWordpieceTokenizer splitting at whitespace and punctuation (as the original)."""
    # Words over 4 bytes per character surely exceed the limit: the op makes them [UNK];
    # shorter ones are checked in characters by `_limit_word_length`.
    model = pywrap_fast_wordpiece_tokenizer_model_builder.build_fast_wordpiece_model(
        _op_vocabulary(vocabulary),
        4 * max_chars_per_word,
        SUFFIX_INDICATOR,
        UNKNOWN_TOKEN,
        False,
        True,
    )
    return tf_text.FastWordpieceTokenizer(
        token_out_type=tf.int32, model_buffer=_uint8_constant(model)
    )


def _to_input_offsets(norm_offsets, ids, offsets):
    """Byte offsets in the normalized texts -> in the input texts (flat gathers only).

    norm_offsets: ragged [N, (L+1)] input offset of each normalized byte; ids: ragged
    [N, (T)]; offsets: [M] flat offsets in the normalized texts, clamped to them.
    """
    text = row_ids(ids)  # [M]
    limit = tf.gather(norm_offsets.row_lengths() - 1, text)
    offsets = tf.minimum(tf.cast(offsets, limit.dtype), limit)
    return ids.with_flat_values(
        tf.gather(norm_offsets.flat_values, tf.gather(norm_offsets.row_splits, text) + offsets)
    )


def _uint8_constant(buffer):
    return tf.constant(np.frombuffer(buffer, np.uint8))


def _as_tensor(x, dtype):
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x
    if isinstance(x, (list, tuple)) and dtype == tf.int32:
        return tf.ragged.constant(x, dtype)
    return tf.convert_to_tensor(x, dtype)


def _limit_word_length(outputs, is_suffix, num_chars, max_chars, unk_id):
    """Replaces the pieces of each word longer than `max_chars` by one [UNK].

    outputs: [ids] or [ids, starts, ends], ragged [N, (T)]. A word is a non-suffix piece
    followed by its "##" pieces; its length is the sum of the pieces' characters.
    """
    ids, *offsets = outputs
    pieces = ids.flat_values  # [M]
    is_start = tf.logical_not(tf.gather(is_suffix, pieces))  # [M]
    word = tf.cumsum(tf.cast(is_start, tf.int32)) - 1  # [M] word index of each piece
    num_words = tf.reduce_sum(tf.cast(is_start, tf.int32))
    word_chars = tf.math.unsorted_segment_sum(tf.gather(num_chars, pieces), word, num_words)
    too_long = tf.gather(word_chars, word) > max_chars  # [M]
    keep = tf.logical_or(is_start, tf.logical_not(too_long))  # [M]
    # int32 segment sums: TFLite's builtin kernels have no int64 variant.
    row_lengths = tf.math.unsorted_segment_sum(
        tf.cast(keep, tf.int32), row_ids(ids), tf.cast(ids.nrows(), tf.int32)
    )  # [N]
    row_lengths = tf.cast(row_lengths, ids.row_splits.dtype)

    def rebuild(values):
        return tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(values, keep), row_lengths, validate=False
        )

    outputs = [rebuild(tf.where(too_long, tf.cast(unk_id, pieces.dtype), pieces))]
    if offsets:
        starts, ends = offsets
        word_end = tf.cast(
            tf.math.unsorted_segment_max(  # int32: TFLite's kernel.
                tf.cast(ends.flat_values, tf.int32), word, num_words
            ),
            ends.dtype,
        )
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
