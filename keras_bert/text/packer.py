"""BertPacker: one or two token-id segments -> [CLS] A [SEP] (B [SEP]) encoder inputs.

Dimensions: B batch, T segment length (ragged), S packed sequence length.
"""

import keras
import tensorflow as tf

from keras_bert.inputs import INPUT_NAMES

TRUNCATIONS = ("longest_first", "waterfall")


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPacker(keras.layers.Layer):
    """Packs token ids into `input_word_ids`, `input_mask` and `input_type_ids`.

    The sequence is `[CLS] A [SEP]` (type 0) followed by `B [SEP]` (type 1) for pairs,
    then `pad_id` up to the length. As in the original `convert_single_example`, a row
    whose B has no tokens is packed as a single text (no second [SEP]; A truncated to
    seq_length - 2), and a B cut to nothing (seq_length 3 or 4) leaves no [SEP] either.
    Runs in-graph on batches, in tf.data, in a functional model and in a SavedModel, with
    dense ops only (TFLite builtins).

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

    def __init__(
        self, seq_length=None, *, cls_id, sep_id, pad_id=0, truncation="longest_first", **kwargs
    ):
        super().__init__(**kwargs)
        if seq_length is not None and (not isinstance(seq_length, int) or seq_length < 2):
            raise ValueError(
                f"seq_length must be None or an int >= 2 ([CLS] and [SEP]), got {seq_length!r}."
            )
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
        segments = [_as_segment(s) for s in segments]  # (values [N], row_splits [B + 1], batched)
        unbatched = not segments[0][2]
        if any(s[2] == unbatched for s in segments):
            raise ValueError("Segments must be all batched [B, (T)] or all unbatched [T].")
        if self.seq_length is not None and self.seq_length < 1 + len(segments):
            raise ValueError(
                f"seq_length {self.seq_length} cannot hold [CLS] and {len(segments)} [SEP] tokens; "
                f"pairs need seq_length >= 3."
            )
        with tf.control_dependencies(_same_batch_size(segments)):
            starts = [splits[:-1] for _, splits, _ in segments]  # (B,) each
            lengths = [splits[1:] - splits[:-1] for _, splits, _ in segments]  # (B,) each
        kept = self._kept_lengths(lengths)
        outputs = self._pack([values for values, _, _ in segments], starts, kept)  # (B, S) each
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _kept_lengths(self, lengths):
        """Tokens kept from each segment so that the packed row fits in seq_length."""
        if self.seq_length is None:
            return lengths
        single_budget = self.seq_length - 2
        if len(lengths) == 1:
            return [tf.minimum(lengths[0], single_budget)]
        len_a, len_b = lengths
        budget = self.seq_length - 3
        if self.truncation == "waterfall":
            keep_a = tf.minimum(len_a, budget)
            keep_b = tf.minimum(len_b, budget - keep_a)
        else:
            keep_a, keep_b = longest_first_lengths(len_a, len_b, budget)
        # A row whose B has no tokens is a single text (the original's `if tokens_b:`).
        keep_a = tf.where(len_b == 0, tf.minimum(len_a, single_budget), keep_a)
        return [keep_a, keep_b]

    def _pack(self, values, starts, kept):
        """Writes [CLS] A [SEP] (B [SEP]) [PAD]... with dense index arithmetic (TFLite builtins)."""
        keep_a = kept[0][:, tf.newaxis]  # (B, 1)
        keep_b = kept[1][:, tf.newaxis] if len(kept) == 2 else tf.zeros_like(keep_a)  # (B, 1)
        has_b = tf.cast(keep_b > 0, tf.int32)  # (B, 1): no [SEP] for an empty B
        total = 2 + keep_a + keep_b + has_b  # (B, 1)
        width = self.seq_length or tf.maximum(tf.reduce_max(total), 0)
        pos = tf.range(width)[tf.newaxis, :]  # (1, S)
        in_a = (pos >= 1) & (pos <= keep_a)  # (B, S)
        b_pos = pos - keep_a - 2  # (B, S): position inside B
        in_b = (b_pos >= 0) & (b_pos < keep_b)  # (B, S)
        is_sep = (pos == keep_a + 1) | ((b_pos == keep_b) & (has_b > 0))  # (B, S)
        ids = tf.fill(tf.shape(in_a), self.pad_id)  # (B, S)
        ids = tf.where(in_a, _take(values[0], starts[0][:, tf.newaxis] + pos - 1), ids)
        if len(kept) == 2:
            ids = tf.where(in_b, _take(values[1], starts[1][:, tf.newaxis] + b_pos), ids)
        ids = tf.where(is_sep, self.sep_id, tf.where(pos == 0, self.cls_id, ids))
        type_ids = tf.cast(in_b | (is_sep & (b_pos >= 0)), tf.int32)
        return {
            "input_word_ids": ids,
            "input_mask": tf.cast(pos < total, tf.int32),
            "input_type_ids": type_ids,
        }

    def compute_output_spec(self, inputs):
        segments = inputs if isinstance(inputs, (tuple, list)) else [inputs]
        shape = tuple(segments[0].shape[:1] if len(segments[0].shape) >= 2 else ()) + (
            self.seq_length,
        )
        return {k: keras.KerasTensor(shape, dtype="int32") for k in INPUT_NAMES}

    def get_config(self):
        config = super().get_config()
        config.update(
            seq_length=self.seq_length,
            cls_id=self.cls_id,
            sep_id=self.sep_id,
            pad_id=self.pad_id,
            truncation=self.truncation,
        )
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
    kept_a = tf.where(
        fits | (only_longer & (len_a <= len_b)),
        len_a,
        tf.where(only_longer, budget - len_b, half_a),
    )
    kept_b = tf.where(
        fits | (only_longer & (len_b < len_a)), len_b, tf.where(only_longer, budget - len_a, half_b)
    )
    return kept_a, kept_b


def _same_batch_size(segments):
    """Checks that A and B have the same number of rows; returns the graph's check ops."""
    if len(segments) == 1:
        return []
    rows_a, rows_b = (splits.shape[0] for _, splits, _ in segments)
    if rows_a is not None and rows_b is not None and rows_a != rows_b:
        raise ValueError(
            f"Segments A and B have different batch sizes: {rows_a - 1} and {rows_b - 1}."
        )
    check = tf.debugging.assert_equal(
        tf.shape(segments[0][1]),
        tf.shape(segments[1][1]),
        message="Segments A and B have different batch sizes",
    )
    return [] if check is None else [check]


def _take(values, index):
    """values[index] where index is valid, anything (a padding value) elsewhere."""
    padded = tf.concat([values, tf.zeros([1], values.dtype)], axis=0)  # never empty
    return tf.gather(padded, tf.clip_by_value(index, 0, tf.shape(values)[0]))


def _as_segment(segment):
    """Checks one segment of ids; returns (int32 values [N], int32 row_splits [B + 1], batched).

    Ragged [B, (T)] and [B, (words), (pieces)], dense [B, T] (full rows) and dense [T]
    (one unbatched example) are accepted.
    """
    if isinstance(segment, tf.RaggedTensor):
        if segment.shape.rank == 3:  # (B, (words), (pieces)) from a word-level tokenizer
            segment = segment.merge_dims(-2, -1)
        if segment.shape.rank != 2:
            raise ValueError(
                f"A ragged segment must be [batch, (tokens)], got shape {segment.shape}."
            )
        values, splits, batched = segment.values, segment.row_splits, True
    else:
        segment = tf.convert_to_tensor(segment)
        if segment.shape.rank not in (1, 2):
            raise ValueError(
                f"A dense segment must be [tokens] or [batch, tokens], got shape {segment.shape}."
            )
        batched = segment.shape.rank == 2
        shape = tf.shape(segment)
        rows, width = (shape[0], shape[1]) if batched else (1, shape[0])
        values, splits = tf.reshape(segment, [-1]), tf.range(rows + 1) * width
    if not values.dtype.is_integer:
        raise TypeError(f"Segments must hold integer token ids, got {values.dtype.name}.")
    return tf.cast(values, tf.int32), tf.cast(splits, tf.int32), batched
