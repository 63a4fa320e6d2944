"""SQuAD features: `[CLS] question [SEP] window [SEP]` over sliding windows of the context.

As the original run_squad.py's `convert_examples_to_features`: the question is cut to
`max_query_length` tokens; the context's tokens are cut into windows of up to
`seq_length - len(question) - 3` tokens, each starting `doc_stride` tokens after the last; a token
in several windows is scored from the one where it has the most context (`max_context_masks`).
Training labels are the answer's first and last token in each window that holds the whole answer,
else [CLS] (position 0) as in the original; unanswerable (v2.0) questions point at [CLS] too.

Unlike the original, answers are mapped to tokens through the tokenizer's character offsets, not
whitespace words: the answer is the tightest token span covering its characters, and predicted
spans come back as exact substrings of the context (`squad.postprocess`). The tokenizer gives
byte offsets; they are turned into character offsets (Python string indices, as the files'
`answer_start`) per context.

Speed: every distinct context and every question is tokenized once, in large batches of the
tokenizer's ops; windows, labels and max-context masks are NumPy.

`FeatureSet.extras` (host side, for post-processing; indexed by feature or context, so they
belong to the FeatureSet as built, not to a `select` of it):
- `context_index`: int [num_examples], the context of each example;
- `char_starts`, `char_ends`: per context, int arrays [T]: each context token's character span;
- `window_start`: int [N], the context token each feature's window starts at;
- `doc_offset`: int [N], the position of that token in the feature (question tokens + 2);
- `max_context`: per feature, bool array [window length];
- `skipped`: indices of the training examples left out (answer not found; see `squad.data`).

Dimensions: N features, T tokens of a context, W windows of a context.
"""

import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert.tasks import features as feature_lib
from keras_bert.tasks.squad.data import SquadDataError, locate_answer

TOKENIZE_BATCH = 4096  # Texts per call of the tokenizer.


def encode_examples(
    examples, tokenizer, seq_length, doc_stride=128, max_query_length=64, training=False
):
    """SQuAD examples -> `FeatureSet` (see the module docstring).

    Args:
        examples: list of `SquadExample`.
        tokenizer: `keras_bert.text.BertTokenizer`.
        seq_length: int, the longest feature (the original's max_seq_length, 384).
        doc_stride: int, tokens between the starts of consecutive windows.
        max_query_length: int, question tokens kept.
        training: bool. Add `start_positions` / `end_positions` labels [N]; examples whose
            answer cannot be found are skipped (logged, listed in `extras["skipped"]`).

    Returns:
        `FeatureSet` with one or more features per example (`example_index`).

    Raises:
        ValueError: a question leaves no room for the context in `seq_length`.
        SquadDataError: a training question without an answer (v1.1).
    """
    contexts, context_index = _distinct([e.context for e in examples])
    char_starts, char_ends, context_ids = _tokenize_contexts(tokenizer, contexts)
    questions = _tokenize(
        tokenizer, [e.question.encode("utf-8", "surrogatepass") for e in examples]
    )[0]
    rows, starts, ends = [], [], []
    example_index, window_start, doc_offset, max_context, skipped = [], [], [], [], []
    cls, sep = np.array([tokenizer.cls_id], np.int32), np.array([tokenizer.sep_id], np.int32)
    for i, example in enumerate(examples):
        c = context_index[i]
        answer = None
        if training:
            answer = _answer_tokens(example, char_starts[c], char_ends[c])
            if answer is None:
                skipped.append(i)
                continue
        query = questions[i][:max_query_length]
        room = _context_room(seq_length, query, example.qas_id, max_query_length)
        windows = doc_windows(len(context_ids[c]), room, doc_stride)
        for (start, length), mask in zip(windows, max_context_masks(windows, len(context_ids[c]))):
            rows.append(
                np.concatenate([cls, query, sep, context_ids[c][start : start + length], sep])
            )
            example_index.append(i)
            window_start.append(start)
            doc_offset.append(len(query) + 2)
            max_context.append(mask)
            if training:
                first, last = _window_labels(answer, start, length, len(query) + 2)
                starts.append(first)
                ends.append(last)
    _log_skipped(examples, skipped)
    inputs = _ragged_inputs(rows, doc_offset)
    labels = {}
    if training:
        labels = {
            "start_positions": np.array(starts, np.int32),
            "end_positions": np.array(ends, np.int32),
        }
    extras = {
        "context_index": np.array(context_index, np.int64),
        "char_starts": char_starts,
        "char_ends": char_ends,
        "window_start": np.array(window_start, np.int64),
        "doc_offset": np.array(doc_offset, np.int64),
        "max_context": max_context,
        "skipped": skipped,
    }
    return feature_lib.FeatureSet(inputs, labels, np.array(example_index, np.int64), extras)


def _context_room(seq_length, query, qas_id, max_query_length):
    """Context tokens a window holds beside the query; raises ValueError if none."""
    room = seq_length - len(query) - 3
    if room < 1:
        raise ValueError(
            f"seq_length {seq_length} leaves no room for the context of question "
            f"{qas_id!r} ({len(query)} question tokens): raise seq_length or lower "
            f"max_query_length ({max_query_length})."
        )
    return room


def _window_labels(answer, start, length, doc_offset):
    """The answer's (first, last) context tokens as positions in the feature of the window
    (start, length) whose context starts at doc_offset; (0, 0) ([CLS]) if it is not inside."""
    first, last = answer
    inside = first >= start and last < start + length
    return (
        first - start + doc_offset if inside else 0,
        last - start + doc_offset if inside else 0,
    )


def _log_skipped(examples, skipped):
    """Warns about the training examples skipped because their answer is not found."""
    if not skipped:
        return
    logging.warning(
        "SQuAD training: skipped %d of %d examples whose answer is not found in the context "
        "(not at its answer_start, or no token on it; question ids %s%s).",
        len(skipped),
        len(examples),
        [examples[i].qas_id for i in skipped[:5]],
        " ..." if len(skipped) > 5 else "",
    )


def doc_windows(num_tokens, max_tokens, doc_stride):
    """(start, length) of each window over `num_tokens` context tokens, as the original's doc
    spans; one empty window for an empty context (so that every example has a feature)."""
    windows, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens)
        windows.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return windows or [(0, 0)]


def max_context_masks(windows, num_tokens):
    """For each window, bool [length]: is the window its token's "max context" one (the
    original's `_check_is_max_context`: the largest min(left, right) context + 0.01 * window
    length, the first window on ties)."""
    if len(windows) == 1:
        return [np.ones(windows[0][1], bool)]
    start, length = np.array(windows).T  # (W,) each
    end = start + length - 1
    position = np.arange(num_tokens)[None, :]  # (1, T)
    score = (
        np.minimum(position - start[:, None], end[:, None] - position) + 0.01 * length[:, None]
    )  # (W, T)
    inside = (position >= start[:, None]) & (position <= end[:, None])
    best = np.argmax(np.where(inside, score, -np.inf), axis=0)  # (T,)
    return [best[s : s + n] == w for w, (s, n) in enumerate(windows)]


def answer_token_span(char_starts, char_ends, start, end):
    """(first, last) context tokens covering the characters [start, end), or None if none does
    (an answer of whitespace or characters the tokenizer drops)."""
    first = int(np.searchsorted(char_ends, start, side="right"))
    last = int(np.searchsorted(char_starts, end, side="left")) - 1
    return (first, last) if first <= last else None


def _answer_tokens(example, char_starts, char_ends):
    """The training answer's (first, last) context tokens; (-1, -1) if unanswerable; None to
    skip."""
    if example.is_impossible:
        return -1, -1
    if not example.answers:
        raise SquadDataError(
            f"Training needs an answer: question {example.qas_id!r} (article {example.title!r}) "
            f"has none."
        )
    span = locate_answer(example.context, *example.answers[0])
    return None if span is None else answer_token_span(char_starts, char_ends, *span)


def _distinct(texts):
    """(distinct texts in first-seen order, index of each text among them)."""
    index = {}
    order = [index.setdefault(t, len(index)) for t in texts]
    return list(index), order


def _tokenize_contexts(tokenizer, contexts):
    """Per context: token character starts and ends, and ids (NumPy arrays [T])."""
    data = [c.encode("utf-8", "surrogatepass") for c in contexts]
    ids, byte_starts, byte_ends = _tokenize(tokenizer, data)
    char_starts, char_ends = [], []
    for text, raw, s, e in zip(contexts, data, byte_starts, byte_ends):
        if len(raw) != len(text):  # Not ASCII: byte offset -> character offset.
            byte = np.frombuffer(raw, np.uint8)
            chars = np.concatenate([[0], np.cumsum((byte & 0xC0) != 0x80)])  # (bytes + 1,)
            s, e = chars[s], chars[e]
        char_starts.append(s)
        char_ends.append(e)
    return char_starts, char_ends, ids


def _tokenize(tokenizer, texts):
    """(ids, byte starts, byte ends) of each of the UTF-8 `texts`: three lists of NumPy arrays.

    Eager calls on large batches: as fast as a graph function here, without its one-off cost
    of tracing and optimizing the tokenizer's graph (seconds)."""
    parts = []
    for i in range(0, len(texts), TOKENIZE_BATCH):
        ids, starts, ends = tokenizer.tokenize_with_offsets(
            tf.constant(texts[i : i + TOKENIZE_BATCH], tf.string)
        )
        parts.append(
            [
                t.numpy()
                for t in (ids.flat_values, ids.row_lengths(), starts.flat_values, ends.flat_values)
            ]
        )
    if not parts:
        return [], [], []
    bounds = np.cumsum(np.concatenate([p[1] for p in parts]))[:-1]
    return tuple(np.split(np.concatenate([p[k] for p in parts]), bounds) for k in (0, 2, 3))


def _ragged_inputs(rows, doc_offset):
    """input_word_ids and input_type_ids (0 on [CLS] question [SEP], 1 after) as ragged [N, (L)]."""
    lengths = np.array([len(r) for r in rows], np.int64)
    flat = np.concatenate(rows).astype(np.int32) if rows else np.zeros([0], np.int32)
    position = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    types = (position >= np.repeat(np.array(doc_offset, np.int64), lengths)).astype(np.int32)
    return {
        "input_word_ids": tf.RaggedTensor.from_row_lengths(flat, lengths),
        "input_type_ids": tf.RaggedTensor.from_row_lengths(types, lengths),
    }
