"""Sliding windows over long texts, in-graph: texts -> the encoder inputs of every window.

One function for training features and every export (SavedModel, TFLite): SQuAD's question and
context (`keras_bert.export.spans`), and the sentence tasks' long texts
(`keras_bert.tasks.features.encode_windows`, `keras_bert.export.signatures`).

- A single text is cut into windows of `seq_length - 2` tokens, each packed as
  `[CLS] window [SEP]` (types 0).
- A pair keeps its first text whole up to `max_first_length` tokens and cuts the second into
  windows of `seq_length - len(first) - 3` tokens, each packed as `[CLS] first [SEP] window [SEP]`
  (types 1 from the window on), as the original run_squad.py.
- Window starts are `doc_stride` tokens apart (at most the window: no token is skipped), the last
  window ends with the text; an empty text has one empty window. `max_windows` keeps the first
  windows of each text (the rest of a longer text is not read: `needed` says how many it had).

Every op has a TFLite builtin or a tensorflow-text TFLite kernel: no ragged slicing.

Dimensions: B texts, W windows (flat over the batch), S sequence, T tokens.
"""

import tensorflow as tf

from keras_bert.text.packer import _take

MIN_LENGTH = 2  # [CLS] [SEP]: an empty text, and the width of an empty batch.


def pack_windows(
    tokenizer, first, second, seq_length, doc_stride, max_first_length, max_windows=None
):
    """Texts [B] -> every window's encoder inputs and facts (see the module docstring).

    Args:
        tokenizer: `keras_bert.text.BertTokenizer`.
        first: tf.string [B], the texts kept whole (SQuAD's questions), or None for single
            texts.
        second: tf.string [B], the texts cut into windows (SQuAD's contexts).
        seq_length: int, the longest packed window.
        doc_stride: int, tokens between the starts of a text's windows.
        max_first_length: int, tokens of `first` kept (ignored for single texts).
        max_windows: int or None, windows kept per text (the first ones).

    Returns:
        (inputs, windows, tokens): encoder inputs int32 [W, S] (S: the longest window); windows,
        a dict of int32 [W] `example`, `start` (its first token of `second`), `length` (its
        tokens of `second`), `offset` (the position of its first such token) and of int32 [B]
        `count` (windows), `needed` (windows without `max_windows`), `num_tokens`, `room`,
        `step`; tokens, `second`'s (ids, byte starts, byte ends), ragged [B, (T)].
    """
    tokens = tokenizer.tokenize_with_offsets(second)  # (B, (T)) each
    ids = tokens[0]
    num_tokens = tf.cast(ids.row_lengths(), tf.int32)  # (B,)
    if first is None:
        query = tf.RaggedTensor.from_row_lengths(
            tf.zeros([0], tf.int32), tf.zeros_like(ids.row_lengths())
        )
        query_length, specials = tf.zeros_like(num_tokens), 2  # [CLS] window [SEP]
    else:
        query = tokenizer(first)  # (B, (Q)); the first max_first_length are kept
        query_length = tf.minimum(tf.cast(query.row_lengths(), tf.int32), max_first_length)
        specials = 3  # [CLS] first [SEP] window [SEP]
    room = seq_length - query_length - specials  # (B,) >= 1: checked by the callers
    step = tf.minimum(room, doc_stride)  # (B,) a window of `room` tokens ends before the next
    needed = (tf.maximum(num_tokens - room, 0) + step - 1) // step + 1  # (B,) 1 if empty
    count = needed if max_windows is None else tf.minimum(needed, max_windows)
    first_window = tf.cumsum(count, exclusive=True)  # (B,) the first window of each text
    example = segment_ids(first_window, tf.reduce_sum(count))  # (W,)
    start = (tf.range(tf.size(example)) - tf.gather(first_window, example)) * tf.gather(
        step, example
    )  # (W,)
    length = tf.minimum(tf.gather(num_tokens, example) - start, tf.gather(room, example))  # (W,)
    offset = tf.gather(query_length, example) + specials - 1  # (W,)
    total = offset + length + 1  # (W,)
    width = tf.maximum(tf.reduce_max(total), MIN_LENGTH)
    pos = tf.range(width)[tf.newaxis, :]  # (1, S)
    offset_, end_ = offset[:, tf.newaxis], (offset + length)[:, tf.newaxis]  # (W, 1)
    query_index = (
        tf.gather(tf.cast(query.row_splits, tf.int32), example)[:, tf.newaxis] + pos - 1
    )  # (W, S)
    context_index = (tf.gather(tf.cast(ids.row_splits, tf.int32), example) + start - offset)[
        :, tf.newaxis
    ] + pos
    word_ids = tf.where(pos < offset_ - 1, _take(query.values, query_index), tokenizer.sep_id)
    word_ids = tf.where((pos >= offset_) & (pos < end_), _take(ids.values, context_index), word_ids)
    word_ids = tf.where(
        pos == 0, tokenizer.cls_id, tf.where(pos > end_, tokenizer.pad_id, word_ids)
    )
    mask = pos < total[:, tf.newaxis]  # (W, S)
    types = (pos >= offset_) & mask if first is not None else tf.zeros_like(mask)
    inputs = {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(mask, tf.int32),
        "input_type_ids": tf.cast(types, tf.int32),
    }
    windows = {
        "example": example,
        "start": start,
        "length": length,
        "offset": offset,
        "count": count,
        "needed": needed,
        "num_tokens": num_tokens,
        "room": room,
        "step": step,
    }
    return inputs, windows, tokens


def segment_ids(first, total):
    """int32 [total]: the segment of each position, segment i starting at `first[i]`
    (increasing)."""
    marks = tf.math.unsorted_segment_sum(
        tf.ones_like(first[1:]), first[1:], total
    )  # (total,) 1 where one starts
    return tf.cumsum(marks)


def pool_windows(logits, example, count, pooling):
    """Each text's logits from its windows': their "mean", "max" (per class) or "first".

    Args:
        logits: float32 [W, C], windows in text order (`pack_windows`' order).
        example: int32 [W], the text of each window. count: int32 [B], windows per text (>= 1).
        pooling: str, "mean", "max" or "first".

    Returns:
        float32 [B, C].
    """
    num_texts = tf.size(count)
    if pooling == "mean":
        total = tf.math.unsorted_segment_sum(logits, example, num_texts)  # (B, C)
        return total / tf.cast(count, logits.dtype)[:, tf.newaxis]
    if pooling == "max":
        return tf.math.unsorted_segment_max(logits, example, num_texts)
    if pooling == "first":
        return tf.gather(logits, tf.cumsum(count, exclusive=True))
    raise ValueError(f"window_pooling must be mean, max or first, got {pooling!r}.")
