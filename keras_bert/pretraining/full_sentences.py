"""RoBERTa's full-sentence rows (Liu et al. 2019, section 4.2, FULL-SENTENCES) for objective "mlm".

Each row is packed with full sentences taken contiguously from one or more documents, up to the
sequence length: [CLS] sentences [SEP], with an extra [SEP] between the sentences of two documents
(rows cross document boundaries), one segment (type ids 0) and no next-sentence task
(`next_sentence_labels` 0, which `keras-bert-pretrain --objective=mlm` ignores). Masking is the
static writer's (`examples.masked_features`: the original's 80/10/10 rule, whole-word masking too).

Rows are filled greedily in corpus order: a sentence that does not fit closes the row and starts
the next one, so every sentence is used once per duplicate; a sentence longer than a row
(max_seq_length - 2 tokens) fills a row alone, truncated as the original truncates (each removed
token from the front or the back by a fair coin: the front count is Binomial(excess, 0.5)). Rows
do not cross chunks (`static_records`): a chunk's last row may be short. Unlike the paired
objectives, `short_seq_prob` does not apply (RoBERTa fills every row), and every duplicate has the
same rows with new masks (in a new order).

Dimensions: N rows, S max_seq_length, P max_predictions_per_seq.
"""

import numpy as np

from keras_bert.pretraining.examples import masked_features

SEPARATOR = -1  # In `fill_rows`' rows: the [SEP] between two documents.


def fill_rows(chunk, max_seq_length):
    """The rows of a chunk: sentences contiguous, up to max_seq_length - 2 tokens a row.

    Args:
      chunk: `examples.TokenizedChunk`.
      max_seq_length: int S (each row also holds [CLS] and a final [SEP]).

    Returns:
      list of rows, each a list of sentence indices of the chunk with `SEPARATOR` between the
      sentences of two documents; a row of one sentence may be longer than S - 2 (truncated
      later by `create_examples`).
    """
    budget = max_seq_length - 2
    lengths = np.diff(chunk.sentence_starts).tolist()
    documents = np.repeat(np.arange(chunk.num_documents), np.diff(chunk.document_starts)).tolist()
    rows, row, used = [], [], 0
    for sentence, length in enumerate(lengths):
        new_document = bool(row) and documents[sentence] != documents[row[-1]]
        if row and used + length + new_document > budget:
            rows.append(row)
            row, used, new_document = [], 0, False
        if new_document:
            row.append(SEPARATOR)
        row.append(sentence)
        used += length + new_document
        if used >= budget:
            rows.append(row)
            row, used = [], 0
    if row:
        rows.append(row)
    return rows


def row_ids(chunk, rows, max_seq_length, cls_id, sep_id, pad_id, np_rng):
    """input_ids [N, S] and lengths [N] of the rows of `fill_rows` ([CLS] ... [SEP], padded
    with pad_id; a one-sentence row longer than S truncated at random as the original)."""
    budget = max_seq_length - 2
    starts = chunk.sentence_starts
    input_ids = np.full((len(rows), max_seq_length), pad_id, np.int64)
    lengths = np.zeros(len(rows), np.int64)
    for r, row in enumerate(rows):
        pieces = [
            np.array([sep_id]) if s == SEPARATOR else chunk.token_ids[starts[s] : starts[s + 1]]
            for s in row
        ]
        tokens = np.concatenate(pieces)
        if len(tokens) > budget:  # One sentence longer than a row: the original's truncation.
            front = np_rng.binomial(len(tokens) - budget, 0.5)
            tokens = tokens[front : front + budget]
        n = len(tokens) + 2
        input_ids[r, :n] = np.concatenate([[cls_id], tokens, [sep_id]])
        lengths[r] = n
    return input_ids, lengths


def create_examples(
    chunk,
    max_seq_length,
    max_predictions_per_seq,
    masked_lm_prob,
    vocab_size,
    cls_id,
    sep_id,
    mask_id,
    pad_id,
    seed_sequence,
    is_continuation=None,
):
    """One duplicate's full-sentence examples of a chunk: rows, truncation, masking, shuffling.

    Args: as `examples.create_examples` (without short_seq_prob and sentence_order).

    Returns:
      dict of arrays with the original feature names: input_ids, input_mask, segment_ids (0)
      [N, S], masked_lm_positions, masked_lm_ids, masked_lm_weights [N, P],
      next_sentence_labels [N, 1] (0).
    """
    np_rng = np.random.default_rng(seed_sequence)
    rows = fill_rows(chunk, max_seq_length)
    input_ids, lengths = row_ids(chunk, rows, max_seq_length, cls_id, sep_id, pad_id, np_rng)
    vocabulary = (vocab_size, cls_id, sep_id, mask_id, pad_id)
    masking = (max_predictions_per_seq, masked_lm_prob, *vocabulary, np_rng, is_continuation)
    labels = np.zeros(len(rows), np.int64)  # No next-sentence task.
    return masked_features(input_ids, np.zeros_like(input_ids), lengths, labels, *masking)
