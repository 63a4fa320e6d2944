"""In-graph SQuAD: a question and its context -> windows with a doc stride -> the best answer span.

The same features and post-processing as `keras_bert.tasks.squad_features` and
`keras_bert.tasks.squad_postprocess` (the original run_squad.py's), for the top answer:
- the question keeps its first `max_query_length` tokens; the context is cut into windows of
  `seq_length - len(question) - 3` tokens whose starts are `doc_stride` tokens apart, each
  packed as `[CLS] question [SEP] window [SEP]` (types 1 from the window on);
- per window, the `n_best_size` best start and end positions (among its real tokens, ties to
  the first) pair into candidate spans, kept when both ends lie in the window's context, the
  end is not before the start, the span has at most `max_answer_length` tokens and the window
  is the start token's max-context window; the answer is the candidate with the highest start
  + end logit over all windows (the first on ties, in window then start-major order);
- SQuAD 2.0: the null score is the smallest [CLS] start + end logit over the windows; the
  answer is "" when the null score minus the best span's score exceeds the threshold.

Dimensions: B questions, W windows (flat over the batch), S sequence, N n_best_size.
"""

import tensorflow as tf

from keras_bert.export.text_inputs import MIN_LENGTH
from keras_bert.text.packer import _take

NULL_SCORE = 1e6  # squad_postprocess's start value of the smallest null score.


def pack_windows(tokenizer, question, context, seq_length, doc_stride, max_query_length):
    """Questions and contexts [B] -> every window's encoder inputs and facts.

    Returns:
        (inputs, windows, tokens): encoder inputs int32 [W, S] (S: the longest window); windows,
        a dict of int32 [W] `example`, `start` (its first context token), `length` (context
        tokens), `offset` (the position of its first context token) and of int32 [B] `count`
        (windows), `num_tokens`, `room`, `step`; tokens, the contexts' (ids, byte starts,
        byte ends), ragged [B, (T)].
    """
    query = tokenizer(question)[:, :max_query_length]  # (B, (Q))
    tokens = tokenizer.tokenize_with_offsets(context)  # (B, (T)) each
    ids = tokens[0]
    query_length = tf.cast(query.row_lengths(), tf.int32)  # (B,)
    num_tokens = tf.cast(ids.row_lengths(), tf.int32)  # (B,)
    room = seq_length - query_length - 3  # (B,) >= 1: checked when the export is built
    step = tf.minimum(room, doc_stride)  # (B,) a window of `room` tokens ends before the next starts
    count = (tf.maximum(num_tokens - room, 0) + step - 1) // step + 1  # (B,) one window for an empty context
    example = tf.repeat(tf.range(tf.size(count)), count)  # (W,)
    first = tf.cumsum(count, exclusive=True)  # (B,) the first window of each example
    start = (tf.range(tf.size(example)) - tf.gather(first, example)) * tf.gather(step, example)  # (W,)
    length = tf.minimum(tf.gather(num_tokens, example) - start, tf.gather(room, example))  # (W,)
    offset = tf.gather(query_length, example) + 2  # (W,)
    total = offset + length + 1  # (W,)
    width = tf.maximum(tf.reduce_max(total), MIN_LENGTH)
    pos = tf.range(width)[tf.newaxis, :]  # (1, S)
    offset_, end_ = offset[:, tf.newaxis], (offset + length)[:, tf.newaxis]  # (W, 1)
    query_index = tf.gather(tf.cast(query.row_splits, tf.int32), example)[:, tf.newaxis] + pos - 1  # (W, S)
    context_index = (tf.gather(tf.cast(ids.row_splits, tf.int32), example) + start - offset)[:, tf.newaxis] + pos
    word_ids = tf.where(pos < offset_ - 1, _take(query.values, query_index), tokenizer.sep_id)
    word_ids = tf.where((pos >= offset_) & (pos < end_), _take(ids.values, context_index), word_ids)
    word_ids = tf.where(pos == 0, tokenizer.cls_id, tf.where(pos > end_, tokenizer.pad_id, word_ids))
    mask = pos < total[:, tf.newaxis]  # (W, S)
    inputs = {"input_word_ids": word_ids, "input_mask": tf.cast(mask, tf.int32),
              "input_type_ids": tf.cast((pos >= offset_) & mask, tf.int32)}
    windows = {"example": example, "start": start, "length": length, "offset": offset, "count": count,
               "num_tokens": num_tokens, "room": room, "step": step}
    return inputs, windows, tokens


def max_context(windows, position, reach):
    """Is each window the max-context one of a context token in it (`squad_features.max_context_masks`)?

    Args:
        windows: dict from `pack_windows`. position: int32 [W, N], context tokens in each window.
        reach: int, a bound on how many windows apart two windows holding one token are.

    Returns:
        bool [W, N].
    """
    example = windows["example"]
    k = tf.range(tf.size(example))[:, tf.newaxis] - tf.gather(tf.cumsum(windows["count"], exclusive=True),
                                                               example)[:, tf.newaxis]  # (W, 1)
    step, room, num_tokens, count = (tf.gather(windows[name], example)[:, tf.newaxis]
                                     for name in ("step", "room", "num_tokens", "count"))  # (W, 1) each
    scores = []
    for d in range(-reach, reach + 1):  # The windows around each one, in order.
        j = k + d
        start = j * step
        length = tf.minimum(num_tokens - start, room)
        inside = (j >= 0) & (j < count) & (position >= start) & (position < start + length)  # (W, N)
        score = tf.cast(tf.minimum(position - start, start + length - 1 - position), tf.float64) + \
            0.01 * tf.cast(length, tf.float64)
        scores.append(tf.where(inside, score, -float("inf")))
    scores = tf.stack(scores, -1)  # (W, N, 2 * reach + 1)
    return _first_max(scores) == reach


def best_spans(windows, start_logits, end_logits, n_best_size, max_answer_length, reach):
    """The best valid span of each question.

    Args:
        windows: dict from `pack_windows`. start_logits, end_logits: float32 [W, S].
        n_best_size, max_answer_length: ints; reach: as `max_context`.

    Returns:
        dict of [B]: `found` (bool, a valid span exists), `score` (float64 start + end logit),
        `first`, `last` (int32 context tokens).
    """
    length, offset = windows["length"][:, tf.newaxis], windows["offset"][:, tf.newaxis]  # (W, 1)
    real = tf.range(tf.shape(start_logits)[1])[tf.newaxis, :] < offset + length + 1  # (W, S)
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    start_value, start = tf.math.top_k(tf.where(real, start_logits, -float("inf")), k)  # (W, N) ties: first
    end_value, end = tf.math.top_k(tf.where(real, end_logits, -float("inf")), k)
    first, last = start - offset, end - offset  # (W, N) positions in the window's context
    valid_start = (first >= 0) & (first < length)
    valid_start &= max_context(windows, first + windows["start"][:, tf.newaxis], reach)
    valid_end = (last >= 0) & (last < length)
    span = end[:, tf.newaxis, :] - start[:, :, tf.newaxis]  # (W, N, N) start-major
    valid = valid_start[:, :, tf.newaxis] & valid_end[:, tf.newaxis, :] & (span >= 0) & (span < max_answer_length)
    score = tf.cast(start_value, tf.float64)[:, :, tf.newaxis] + tf.cast(end_value, tf.float64)[:, tf.newaxis, :]
    score = tf.reshape(tf.where(valid, score, -float("inf")), [tf.shape(score)[0], -1])  # (W, N*N)
    best = _first_max(score)  # (W,)
    window_score = tf.reduce_max(score, -1)  # (W,)
    num_questions = tf.size(windows["count"])
    found = tf.math.unsorted_segment_max(tf.cast(window_score > -float("inf"), tf.int32), windows["example"],
                                         num_questions) > 0  # (B,)
    question_score = tf.where(found, tf.math.unsorted_segment_max(window_score, windows["example"], num_questions),
                              -float("inf"))  # (B,) (the segment max of nothing is the lowest float, not -inf)
    winner = tf.math.unsorted_segment_min(  # (B,) the first window with the question's best score
        tf.where(window_score == tf.gather(question_score, windows["example"]), tf.range(tf.size(best)),
                 tf.int32.max), windows["example"], num_questions)
    winner = tf.minimum(winner, tf.maximum(tf.size(best) - 1, 0))
    pick = tf.stack([winner, tf.gather(best, winner) // k], 1)
    pick_end = tf.stack([winner, tf.gather(best, winner) % k], 1)
    window_start = tf.gather(windows["start"], winner)
    return {"found": found, "score": question_score,
            "first": window_start + tf.gather_nd(first, pick), "last": window_start + tf.gather_nd(last, pick_end)}


def span_bytes(starts, ends, best, has_answer):
    """(start, end) int64 [B]: the byte span of each question's best span in its context, or
    (0, 0) where `has_answer` is False. starts, ends: the contexts' token byte offsets [B, (T)]."""
    row_starts = tf.cast(starts.row_splits[:-1], tf.int32)  # (B,)
    first = _take(starts.flat_values, row_starts + best["first"])
    last = _take(ends.flat_values, row_starts + best["last"])
    return tf.where(has_answer, first, 0), tf.where(has_answer, last, 0)


def null_scores(windows, start_logits, end_logits):
    """SQuAD 2.0: float64 [B], the smallest [CLS] start + end logit over each question's windows."""
    null = tf.cast(start_logits[:, 0], tf.float64) + tf.cast(end_logits[:, 0], tf.float64)  # (W,)
    return tf.minimum(tf.math.unsorted_segment_min(null, windows["example"], tf.size(windows["count"])), NULL_SCORE)


def _first_max(values):
    """The index of the first largest value along the last axis (tf.argmax does not promise the first)."""
    top = tf.reduce_max(values, -1, keepdims=True)
    return tf.reduce_min(tf.where(values == top, tf.range(tf.shape(values)[-1]), tf.int32.max), -1)
