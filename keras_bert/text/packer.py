"""BertPacker: one or two token-id segments -> [CLS] A [SEP] (B [SEP]) encoder inputs.

Dimensions: B batch, T segment length (ragged), S packed sequence length.
"""

import keras
import tensorflow as tf

TRUNCATIONS = ("longest_first", "waterfall")


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPacker(keras.layers.Layer):
    """Packs token ids into `input_word_ids`, `input_mask` and `input_type_ids`.

    The sequence is `[CLS] A [SEP]` (type 0) followed by `B [SEP]` (type 1) for pairs,
    then `pad_id` up to the length. As in the original `convert_single_example`, a row
    whose B has no tokens is packed as a single text (no second [SEP]; A truncated to
    seq_length - 2), and a B cut to nothing (seq_length 3 or 4) leaves no [SEP] either. Runs in-graph on batches: in tf.data, in a
    functional model, in a SavedModel.

    Args:
        seq_length: int or None. An int packs to exactly this length, truncating first;
            None packs each batch to its longest sequence (no truncation; for bucketing).
        cls_id: int, id of [CLS].
        sep_id: int, id of [SEP].
        pad_id: int, id used for padding (input_mask is 0 there).
        truncation: "longest_first" (the original `_truncate_seq_pair`: while too long,
            drop the last token of the longer segment, of B on ties) or "waterfall"
            (keep A whole as far as it fits, then B).

    Call arguments:
        inputs: one segment, or a tuple/list of one or two segments. A segment is a
            tf.RaggedTensor [B, (T)] of ids (a dense [B, T] tensor counts as full rows;
            a 1-D [T] tensor is one unbatched example, packed to [S]).

    Returns:
        dict of int32 tensors [B, S]: `input_word_ids`, `input_mask`, `input_type_ids`.

    Example:
    >>> packer = BertPacker(seq_length=8, cls_id=2, sep_id=3)
    >>> out = packer((tf.ragged.constant([[10, 11, 12]]), tf.ragged.constant([[20, 21]])))
    >>> out["input_word_ids"].numpy().tolist()
    [[2, 10, 11, 12, 3, 20, 21, 3]]
    """

    def __init__(self, seq_length=None, *, cls_id, sep_id, pad_id=0, truncation="longest_first", **kwargs):
        super().__init__(**kwargs)
        if seq_length is not None and (not isinstance(seq_length, int) or seq_length < 2):
            raise ValueError(f"seq_length must be None or an int >= 2 ([CLS] and [SEP]), got {seq_length!r}.")
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}.")
        self.seq_length = seq_length
        self.cls_id = int(cls_id)
        self.sep_id = int(sep_id)
        self.pad_id = int(pad_id)
        self.truncation = truncation
        # Inputs stay TF tensors (ragged included), as in keras-hub preprocessing layers.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

    def call(self, inputs):
        segments = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"BertPacker packs one or two segments, got {len(segments)}.")
        segments = [_as_ragged(s) for s in segments]
        unbatched = segments[0].shape.rank == 1
        if any((s.shape.rank == 1) != unbatched for s in segments):
            raise ValueError("Segments must be all batched [B, (T)] or all unbatched [T].")
        if unbatched:
            segments = [tf.RaggedTensor.from_tensor(s[tf.newaxis]) for s in segments]
        if self.seq_length is not None and self.seq_length < 1 + len(segments):
            raise ValueError(f"seq_length {self.seq_length} cannot hold [CLS] and {len(segments)} [SEP] tokens; "
                             f"pairs need seq_length >= 3.")
        first, second = segments[0], segments[1] if len(segments) == 2 else None
        if self.seq_length is not None:
            first, second = self._truncate(first, second)
        ids, type_ids = self._combine(first, second)  # (B, (S)) each
        shape = [None, self.seq_length]
        outputs = {
            "input_word_ids": ids.to_tensor(self.pad_id, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "input_type_ids": type_ids.to_tensor(0, shape=shape),
        }  # (B, S) each
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _truncate(self, first, second):
        """Cuts A (and B) so that the packed row fits in seq_length."""
        len_a = tf.cast(first.row_lengths(), tf.int32)  # (B,)
        single_budget = self.seq_length - 2
        if second is None:
            return _first_n(first, tf.minimum(len_a, single_budget)), None
        len_b = tf.cast(second.row_lengths(), tf.int32)  # (B,)
        budget = self.seq_length - 3
        if self.truncation == "waterfall":
            keep_a = tf.minimum(len_a, budget)
            keep_b = tf.minimum(len_b, budget - keep_a)
        else:
            keep_a, keep_b = longest_first_lengths(len_a, len_b, budget)
        # A row whose B has no tokens is a single text (the original's `if tokens_b:`).
        keep_a = tf.where(len_b == 0, tf.minimum(len_a, single_budget), keep_a)
        return _first_n(first, keep_a), _first_n(second, keep_b)

    def _combine(self, first, second):
        """[CLS] A [SEP] (type 0), then B [SEP] (type 1) where B has tokens."""
        column = tf.ones([first.nrows(), 1], tf.int32)  # (B, 1)
        head = tf.concat([tf.RaggedTensor.from_tensor(column * self.cls_id), first,
                          tf.RaggedTensor.from_tensor(column * self.sep_id)], axis=1)  # (B, (S))
        if second is None:
            return head, tf.zeros_like(head)
        has_second = tf.cast(second.row_lengths() > 0, second.row_splits.dtype)  # (B,)
        sep = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(has_second)], self.sep_id), has_second)  # (B, (0 or 1))
        tail = tf.concat([second, sep], axis=1)  # (B, (T))
        return tf.concat([head, tail], axis=1), tf.concat([tf.zeros_like(head), tf.ones_like(tail)], axis=1)

    def compute_output_spec(self, inputs):
        segments = inputs if isinstance(inputs, (tuple, list)) else [inputs]
        shape = segments[0].shape[:-1] + (self.seq_length,)
        return {k: keras.KerasTensor(shape, dtype="int32") for k in
                ("input_word_ids", "input_mask", "input_type_ids")}

    def get_config(self):
        config = super().get_config()
        config.update(seq_length=self.seq_length, cls_id=self.cls_id, sep_id=self.sep_id,
                      pad_id=self.pad_id, truncation=self.truncation)
        return config


def longest_first_lengths(len_a, len_b, budget):
    """Lengths kept by the original `_truncate_seq_pair`, in closed form.

    The original pops the last token of the longer segment (of B on ties) until
    len_a + len_b <= budget. If the shorter one fits in half the budget, only the longer
    one shrinks (to budget - shorter); otherwise both end at half, A taking the odd one.

    Args:
        len_a, len_b: int32 tensors [B].
        budget: int, tokens available for A and B together.

    Returns:
        (kept_a, kept_b), int32 tensors [B].
    """
    fits = len_a + len_b <= budget
    shorter = tf.minimum(len_a, len_b)
    only_longer = 2 * shorter <= budget
    half_a, half_b = (budget + 1) // 2, budget // 2
    kept_a = tf.where(fits | (only_longer & (len_a <= len_b)), len_a,
                      tf.where(only_longer, budget - len_b, half_a))
    kept_b = tf.where(fits | (only_longer & (len_b < len_a)), len_b,
                      tf.where(only_longer, budget - len_a, half_b))
    return kept_a, kept_b


def _first_n(segment, n):
    """The first n[i] items of each row of a ragged [B, (T)] tensor."""
    positions = tf.ragged.range(tf.cast(segment.row_lengths(), tf.int32))  # (B, (T))
    return tf.ragged.boolean_mask(segment, positions < n[:, tf.newaxis])


def _as_ragged(segment):
    """Checks one segment and returns it as int32 ids: ragged [B, (T)] or dense [T]."""
    if isinstance(segment, tf.RaggedTensor):
        if segment.shape.rank == 3:  # (B, (words), (pieces)) from a word-level tokenizer
            segment = segment.merge_dims(-2, -1)
        if segment.shape.rank != 2:
            raise ValueError(f"A ragged segment must be [batch, (tokens)], got shape {segment.shape}.")
    else:
        segment = tf.convert_to_tensor(segment)
        if segment.shape.rank == 2:
            segment = tf.RaggedTensor.from_tensor(segment)
        elif segment.shape.rank != 1:
            raise ValueError(f"A dense segment must be [tokens] or [batch, tokens], got shape {segment.shape}.")
    if not segment.dtype.is_integer:
        raise TypeError(f"Segments must hold integer token ids, got {segment.dtype.name}.")
    segment = tf.cast(segment, tf.int32)
    if isinstance(segment, tf.RaggedTensor):
        segment = segment.with_row_splits_dtype(tf.int64)
    return segment
