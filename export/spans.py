"""In-graph SQuAD: a question and its context -> windows with a doc stride -> the best answer span.

The same features and post-processing as `keras_bert.tasks.squad.features` and
`keras_bert.tasks.squad.postprocess` (the original run_squad.py's), for the top answer:
- the question keeps its first `max_query_length` tokens; the context is cut into windows of
  `seq_length - len(question) - 3` tokens whose starts are `doc_stride` tokens apart, each
  packed as `[CLS] question [SEP] window [SEP]` (types 1 from the window on):
  `keras_bert.text.windows.pack_windows`, which the sentence tasks' long texts share;
- per window, the `n_best_size` best start and end positions (among its real tokens, ties to
  the first) pair into candidate spans, kept when both ends lie in the window's context, the
  end is not before the start, the span has at most `max_answer_length` tokens and the window
  is the start token's max-context window; the answer is the candidate with the highest start
  + end logit over all windows (the first on ties, in window then start-major order);
- SQuAD 2.0: the null score is the smallest [CLS] start + end logit over the windows; the
  answer is "" when the null score minus the best span's score exceeds the threshold.

Every op has a TFLite builtin or a tensorflow-text TFLite kernel (the graph also converts to
TFLite): no float64 and no ragged slicing. The Python side scores in float64; here a start +
end logit is the float32 pair (hi, lo) of `_two_sum` (hi + lo is the exact sum), compared
lexicographically, so spans rank and tie exactly as in float64; the max-context score
`min(left, right) + 0.01 * length` becomes its rank among all such float64 values
(`max_context_ranks`). Only the null odds (an output, and its comparison with the threshold)
are float32 arithmetic.

Dimensions: B questions, W windows (flat over the batch), S sequence, N n_best_size.
"""

import numpy as np
import tensorflow as tf

from keras_bert.text.packer import _take
from keras_bert.text.windows import pack_windows  # noqa: F401 (SQuAD's windows, here too)

NULL_SCORE = 1e6  # squad.postprocess's start value of the smallest null score.


def max_context_ranks(seq_length):
    """int32 [seq_length // 2 + 1, seq_length + 1]: at [m, l], the rank of the float64
    `m + 0.01 * l` (`squad.features.max_context_masks`' score of a token with m tokens of context
    on its shorter side in a window of l tokens) among all of them; equal floats, equal ranks."""
    m, length = np.arange(seq_length // 2 + 1)[:, None], np.arange(seq_length + 1)[None, :]
    scores = (
        m + 0.01 * length
    )  # float64, as in Python (m + 0.01 * length does not order as 100 * m + length)
    return np.unique(scores, return_inverse=True)[1].reshape(scores.shape).astype(np.int32)


def max_context(windows, position, reach, seq_length):
    """Is each window the max-context one of a context token in it
    (`squad.features.max_context_masks`)?

    Args:
        windows: dict from `pack_windows`. position: int32 [W, N], context tokens in each window.
        reach: int, a bound on how many windows apart two windows holding one token are.
        seq_length: int, the longest packed window.

    Returns:
        bool [W, N].
    """
    # The 2 * reach + 1 windows around each one at once, as a last axis D (no loop, no IF: in
    # TFLite every op, and every op of both branches of an IF, costs on each call).
    ranks = max_context_ranks(seq_length)
    rows, columns = ranks.shape
    k, step, room, num_tokens, count = _geometry(windows)  # (W, 1) each
    j = k + tf.range(-reach, reach + 1)[tf.newaxis, :]  # (W, D) the windows around, in order
    start = j * step
    length = tf.minimum(num_tokens - start, room)
    exists = (j >= 0) & (j < count)  # (W, D)
    # (W, N, 1) against (W, 1, D), with expand_dims (see best_spans).
    position, start, length = (
        tf.expand_dims(position, 2),
        tf.expand_dims(start, 1),
        tf.expand_dims(length, 1),
    )
    inside = (
        tf.expand_dims(exists, 1) & (position >= start) & (position < start + length)
    )  # (W, N, D)
    context = tf.clip_by_value(
        tf.minimum(position - start, start + length - 1 - position), 0, rows - 1
    )
    score = tf.gather(
        tf.constant(ranks.reshape(-1)), context * columns + tf.clip_by_value(length, 0, columns - 1)
    )  # (W, N, D)
    return _first_max(tf.where(inside, score, -1)) == reach


def _geometry(windows):
    """Each window's index among its text's, and its text's step, room, num_tokens and count:
    int32 [W, 1] each."""
    example = windows["example"]
    k = (
        tf.range(tf.size(example))[:, tf.newaxis]
        - tf.gather(tf.cumsum(windows["count"], exclusive=True), example)[:, tf.newaxis]
    )
    return (k,) + tuple(
        tf.gather(windows[name], example)[:, tf.newaxis]
        for name in ("step", "room", "num_tokens", "count")
    )


def best_spans(
    windows, start_logits, end_logits, n_best_size, max_answer_length, reach, seq_length
):
    """The best valid span of each question.

    Args:
        windows: dict from `pack_windows`. start_logits, end_logits: float32 [W, S].
        n_best_size, max_answer_length: ints; reach, seq_length: as `max_context`.

    Returns:
        dict of [B]: `found` (bool, a valid span exists), `score` (the start + end logit, a
        float32 pair of `_two_sum`, (-inf, 0) if none), `first`, `last` (int32 context tokens).
    """
    length, offset = windows["length"][:, tf.newaxis], windows["offset"][:, tf.newaxis]  # (W, 1)
    real = tf.range(tf.shape(start_logits)[1])[tf.newaxis, :] < offset + length + 1  # (W, S)
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    start_value, start = tf.math.top_k(
        tf.where(real, start_logits, -float("inf")), k
    )  # (W, N) ties: first
    end_value, end = tf.math.top_k(tf.where(real, end_logits, -float("inf")), k)
    first, last = start - offset, end - offset  # (W, N) positions in the window's context
    # (W, N) -> (W, N, N) with expand_dims: TFLite's converter cannot lower tf.newaxis indexing of
    # dynamic shapes.
    valid_start = (first >= 0) & (first < length)
    valid_start &= max_context(windows, first + windows["start"][:, tf.newaxis], reach, seq_length)
    valid_end = (last >= 0) & (last < length)
    span = tf.expand_dims(end, 1) - tf.expand_dims(start, 2)  # (W, N, N) start-major
    valid = (
        tf.expand_dims(valid_start, 2)
        & tf.expand_dims(valid_end, 1)
        & (span >= 0)
        & (span < max_answer_length)
    )
    hi, lo = _two_sum(
        tf.expand_dims(start_value, 2), tf.expand_dims(end_value, 1)
    )  # (W, N, N) start-major
    hi = tf.reshape(tf.where(valid, hi, -float("inf")), [tf.shape(hi)[0], -1])  # (W, N*N)
    lo = tf.reshape(tf.where(valid, lo, 0.0), tf.shape(hi))
    best, window_hi, window_lo = _window_best(hi, lo)  # (W,) each
    example, num_questions = windows["example"], tf.size(windows["count"])
    found = (
        tf.math.unsorted_segment_max(
            tf.cast(window_hi > -float("inf"), tf.int32), example, num_questions
        )
        > 0
    )  # (B,)
    question_hi = tf.where(
        found, tf.math.unsorted_segment_max(window_hi, example, num_questions), -float("inf")
    )  # (B,) (the segment max of nothing is the lowest float, not -inf)
    on_top = window_hi == tf.gather(question_hi, example)  # (W,)
    question_lo = tf.where(
        found,
        tf.math.unsorted_segment_max(
            tf.where(on_top, window_lo, -float("inf")), example, num_questions
        ),
        0.0,
    )
    winner = tf.math.unsorted_segment_min(  # (B,) the first window with the question's best score
        tf.where(
            on_top & (window_lo == tf.gather(question_lo, example)),
            tf.range(tf.size(best)),
            tf.int32.max,
        ),
        example,
        num_questions,
    )
    winner = tf.minimum(winner, tf.maximum(tf.size(best) - 1, 0))
    pick = tf.stack([winner, tf.gather(best, winner) // k], 1)
    pick_end = tf.stack([winner, tf.gather(best, winner) % k], 1)
    window_start = tf.gather(windows["start"], winner)
    question_hi = tf.where(found, question_hi, _minus_infinity(question_hi))  # -inf in TFLite too
    return {
        "found": found,
        "score": (question_hi, question_lo),
        "first": window_start + tf.gather_nd(first, pick),
        "last": window_start + tf.gather_nd(last, pick_end),
    }


def _window_best(hi, lo):
    """(index, hi, lo) [W] of the first largest (hi, lo) pair of each row of [W, M]: `_first_max(hi,
    lo)` with its maxima."""
    window_hi = tf.reduce_max(hi, -1)  # (W,)
    top = hi == window_hi[:, tf.newaxis]
    window_lo = tf.reduce_max(tf.where(top, lo, -float("inf")), -1)
    top &= lo == window_lo[:, tf.newaxis]
    best = tf.reduce_min(tf.where(top, tf.range(tf.shape(hi)[-1]), tf.int32.max), -1)
    return best, window_hi, window_lo


def span_bytes(starts, ends, best, has_answer):
    """(start, end) int32 [B]: the byte span of each question's best span in its context, or
    (0, 0) where `has_answer` is False. starts, ends: the contexts' token byte offsets [B, (T)]."""
    row_starts = tf.cast(starts.row_splits[:-1], tf.int32)  # (B,)
    first = _take(tf.cast(starts.flat_values, tf.int32), row_starts + best["first"])
    last = _take(tf.cast(ends.flat_values, tf.int32), row_starts + best["last"])
    return tf.where(has_answer, first, 0), tf.where(has_answer, last, 0)


def null_scores(windows, start_logits, end_logits):
    """SQuAD 2.0: the smallest [CLS] start + end logit over each question's windows (at most
    `NULL_SCORE`), a float32 pair [B] of `_two_sum`."""
    hi, lo = _two_sum(start_logits[:, 0], end_logits[:, 0])  # (W,) each
    example, num_questions = windows["example"], tf.size(windows["count"])
    null_hi = tf.math.unsorted_segment_min(hi, example, num_questions)  # (B,)
    null_lo = tf.math.unsorted_segment_min(
        tf.where(hi == tf.gather(null_hi, example), lo, float("inf")), example, num_questions
    )
    below = at_most((null_hi, null_lo), (tf.constant(NULL_SCORE, tf.float32), tf.constant(0.0)))
    return tf.where(below, null_hi, NULL_SCORE), tf.where(below, null_lo, 0.0)


def at_most(a, b):
    """bool: is the exact sum of the `_two_sum` pair a at most b's?"""
    return (a[0] < b[0]) | ((a[0] == b[0]) & (a[1] <= b[1]))


def _two_sum(a, b):
    """(hi, lo) float32: hi = a + b rounded, lo its rounding error, hi + lo == a + b exactly
    (Knuth's TwoSum). Rounding is monotone, so pairs order (hi first, then lo) as the exact sums
    do."""
    hi = a + b
    b_part = hi - a
    return hi, (a - (hi - b_part)) + (b - b_part)


def _minus_infinity(like):
    """-inf in the shape of `like`, made at run time: TFLite's converter turns infinite constants
    into the lowest float32 (-3.4e38), which inside a graph compares the same, but not as an
    output."""
    return tf.math.log(tf.zeros_like(like))


def _first_max(values, second=None):
    """The index of the first largest value along the last axis (tf.argmax does not promise the
    first); with `second`, of the largest (values, second) pair."""
    top = values == tf.reduce_max(values, -1, keepdims=True)
    if second is not None:
        top &= second == tf.reduce_max(tf.where(top, second, -float("inf")), -1, keepdims=True)
    return tf.reduce_min(tf.where(top, tf.range(tf.shape(values)[-1]), tf.int32.max), -1)
