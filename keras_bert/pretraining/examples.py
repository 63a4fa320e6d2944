"""Static pre-training examples: sentence pairs and masked LM predictions, as in the original BERT.

The algorithm of google-research/bert `create_pretraining_data.py`, reorganized for speed:
documents are token-id arrays (one flat array per chunk of documents plus sentence offsets), pairs
are index ranges into it (a Python loop over sentences, never over tokens), truncation is computed
in closed form and masking is vectorized with NumPy over all examples of a chunk.

Dimensions: N examples, S max_seq_length, P max_predictions_per_seq, W words per example (<= S).

Differences from the original (documented, distribution-preserving):
- Random next segments are drawn from another document of the same chunk (the original holds the
  whole corpus in memory and draws from all documents).
- Truncation removes the same number of tokens from the same segment as the original's loop; whether
  each removed token comes from the front or the back is a fair coin, drawn as a binomial count.
- Examples are shuffled within one duplicate of one chunk (the original shuffles all of them in
  memory); `create_pretraining_data` spreads them round-robin over the shards.
"""

import dataclasses
import random

import numpy as np


def continuation_pieces(vocabulary):
    """bool array [vocab_size]: True for the "##" pieces that continue a word (whole-word
    masking)."""
    return np.array([t.startswith("##") and len(t) > 2 for t in vocabulary])


@dataclasses.dataclass
class TokenizedChunk:
    """Documents of one chunk as token ids.

    Attributes:
      token_ids: int array [T], the tokens of all sentences, concatenated.
      sentence_starts: int array [num_sentences + 1], sentence k is
        token_ids[starts[k]:starts[k+1]].
      document_starts: int array [num_documents + 1], document d is sentences
        [starts[d], starts[d+1]).
    """

    token_ids: np.ndarray
    sentence_starts: np.ndarray
    document_starts: np.ndarray

    @classmethod
    def from_sentence_lengths(cls, token_ids, sentence_lengths, document_num_sentences):
        """Builds a chunk, dropping empty sentences and documents left without sentences."""
        sentence_lengths = np.asarray(sentence_lengths, np.int64)
        keep = sentence_lengths > 0
        doc_of_sentence = np.repeat(np.arange(len(document_num_sentences)), document_num_sentences)
        doc_sizes = np.bincount(doc_of_sentence[keep], minlength=len(document_num_sentences))
        doc_sizes = doc_sizes[doc_sizes > 0]
        return cls(
            np.asarray(token_ids),
            np.concatenate([[0], np.cumsum(sentence_lengths[keep])]),
            np.concatenate([[0], np.cumsum(doc_sizes)]),
        )

    @property
    def num_documents(self):
        return len(self.document_starts) - 1


@dataclasses.dataclass
class PairRanges:
    """Sentence pairs as ranges into `TokenizedChunk.token_ids` (arrays of shape [N])."""

    a_start: np.ndarray
    a_length: np.ndarray
    b_start: np.ndarray
    b_length: np.ndarray
    is_random_next: np.ndarray


def create_pairs(chunk, max_seq_length, short_seq_prob, rng, sentence_order=False):
    """Creates sentence pairs from every document of a chunk (the original algorithm).

    Per document: a target length (max_seq_length - 3, or uniform in [2, that] with probability
    short_seq_prob); sentences are accumulated until the target is reached; segment A takes a random
    number of them, B the rest (IsNext) or, with probability 0.5 or when only one sentence was
    taken, sentences from a random other document (NotNext), and the unused sentences are put back.
    With `sentence_order` (ALBERT's sentence order prediction), B is always the actual next
    segment and, with probability 0.5, A and B are swapped (label 1); as in ALBERT's writer, a
    single taken sentence still gets a random next segment (label 1).

    Args:
      chunk: TokenizedChunk.
      max_seq_length: int.
      short_seq_prob: float.
      rng: random.Random.
      sentence_order: bool.

    Returns:
      PairRanges, before truncation (`is_random_next`: the label, random next or swapped).
    """
    max_num_tokens = max_seq_length - 3
    starts = chunk.sentence_starts.tolist()
    doc_starts = chunk.document_starts.tolist()
    num_docs = len(doc_starts) - 1
    out = ([], [], [], [], [])
    for doc in range(num_docs):
        first, end = doc_starts[doc], doc_starts[doc + 1]
        target = max_num_tokens
        if rng.random() < short_seq_prob:
            target = rng.randint(2, max_num_tokens)
        chunk_start, i = first, first
        while i < end:
            current_length = starts[i + 1] - starts[chunk_start]
            if i == end - 1 or current_length >= target:
                n = i - chunk_start + 1
                a_end = chunk_start + (rng.randint(1, n - 1) if n >= 2 else 1)
                a_from, a_len = starts[chunk_start], starts[a_end] - starts[chunk_start]
                if n == 1 or (not sentence_order and rng.random() < 0.5):
                    target_b = target - a_len
                    for _ in range(10):
                        other = rng.randint(0, num_docs - 1)
                        if other != doc:
                            break
                    o_first, o_end = doc_starts[other], doc_starts[other + 1]
                    j = rng.randint(o_first, o_end - 1)
                    b_from = starts[j]
                    while j < o_end - 1 and starts[j + 1] - b_from < target_b:
                        j += 1
                    b_len = starts[j + 1] - b_from
                    i = a_end - 1  # Put the unused sentences back.
                    random_next = True
                else:
                    b_from, b_len = starts[a_end], starts[i + 1] - starts[a_end]
                    random_next = sentence_order and rng.random() < 0.5
                    if random_next:  # Sentence order: the segments swapped.
                        a_from, a_len, b_from, b_len = b_from, b_len, a_from, a_len
                for values, v in zip(out, (a_from, a_len, b_from, b_len, random_next)):
                    values.append(v)
                chunk_start = i + 1
            i += 1
    a_start, a_length, b_start, b_length, is_random_next = (np.asarray(v, np.int64) for v in out)
    return PairRanges(a_start, a_length, b_start, b_length, is_random_next.astype(bool))


def truncate_pairs(pairs, max_num_tokens, np_rng):
    """Truncates pairs to max_num_tokens as the original `truncate_seq_pair`, vectorized.

    The original removes one token at a time from the longer segment (B on ties), from the front or
    the back with probability 0.5. The final lengths follow in closed form; the number of tokens
    taken from the front of each segment is Binomial(removed, 0.5).

    Returns:
      PairRanges with updated starts and lengths.
    """
    la, lb = pairs.a_length, pairs.b_length
    excess = np.maximum(la + lb - max_num_tokens, 0)
    # A longer: remove from A until equal, then alternate starting with B.
    d_a = la - lb
    e_a = np.maximum(excess - d_a, 0)
    la_1 = np.where(excess <= d_a, la - excess, lb - e_a // 2)
    lb_1 = np.where(excess <= d_a, lb, lb - (e_a + 1) // 2)
    # B at least as long: remove from B until it is one shorter than A, then alternate starting with
    # A.
    d_b = lb - la + 1
    e_b = np.maximum(excess - d_b, 0)
    la_2 = np.where(excess <= d_b, la, la - (e_b + 1) // 2)
    lb_2 = np.where(excess <= d_b, lb - excess, la - 1 - e_b // 2)
    new_la = np.where(la > lb, la_1, la_2)
    new_lb = np.where(la > lb, lb_1, lb_2)
    front_a = np_rng.binomial(la - new_la, 0.5)
    front_b = np_rng.binomial(lb - new_lb, 0.5)
    return PairRanges(
        pairs.a_start + front_a, new_la, pairs.b_start + front_b, new_lb, pairs.is_random_next
    )


def pack_pairs(token_ids, pairs, max_seq_length, cls_id, sep_id, pad_id=0):
    """Packs pairs into [CLS] A [SEP] B [SEP] rows.

    Returns:
      (input_ids [N, S] int64, segment_ids [N, S] int64, lengths [N] int64); padding is pad_id / 0.
    """
    col = np.arange(max_seq_length)[None, :]  # (1, S)
    la, lb = pairs.a_length[:, None], pairs.b_length[:, None]  # (N, 1)
    lengths = pairs.a_length + pairs.b_length + 3
    in_a = (col >= 1) & (col <= la)
    in_b = (col >= la + 2) & (col < la + 2 + lb)
    src = np.where(in_a, pairs.a_start[:, None] + col - 1, pairs.b_start[:, None] + col - la - 2)
    src = np.clip(src, 0, max(len(token_ids) - 1, 0))
    ids = np.where(in_a | in_b, token_ids[src] if len(token_ids) else pad_id, pad_id)
    ids = np.where((col == la + 1) | (col == lengths[:, None] - 1), sep_id, ids)
    ids = np.where(col == 0, cls_id, ids)
    segment_ids = ((col >= la + 2) & (col < lengths[:, None])).astype(np.int64)
    return ids.astype(np.int64), segment_ids, lengths.astype(np.int64)


def mask_tokens(
    input_ids,
    lengths,
    max_predictions_per_seq,
    masked_lm_prob,
    vocab_size,
    mask_id,
    special_ids,
    rng,
    is_continuation=None,
):
    """Chooses masked LM predictions for packed rows, vectorized (the original's rules).

    num_to_predict = min(P, max(1, round(length * masked_lm_prob))) per row; words (single tokens,
    or with `is_continuation` whole words: a piece and its following "##" pieces) are taken in
    random order while they fit; each chosen word becomes [MASK] (80%), stays (10%) or random ids
    (10%, per token, uniform over the vocabulary as the original). Tokens in `special_ids` or past
    `lengths` are never chosen.

    Args:
      input_ids: int array [N, S].
      lengths: int array [N], real tokens per row.
      max_predictions_per_seq: int P.
      masked_lm_prob: float.
      vocab_size: int.
      mask_id: int.
      special_ids: iterable of int ids never masked ([CLS], [SEP], [PAD]).
      rng: np.random.Generator.
      is_continuation: optional bool array [vocab_size]; True for "##" pieces (whole-word masking).

    Returns:
      dict: input_ids [N, S] (masked), masked_lm_positions [N, P], masked_lm_ids [N, P] (int64),
      masked_lm_weights [N, P] (float32).
    """
    s = input_ids.shape[1]
    maskable, word, num_words = _words(input_ids, lengths, special_ids, is_continuation)
    k = np.minimum(
        max_predictions_per_seq, np.maximum(1, np.round(lengths * masked_lm_prob).astype(np.int64))
    )
    whole_words = is_continuation is not None
    chosen_word = _choose_words(maskable, word, num_words, k, rng, whole_words)  # (N, W)
    chosen = maskable & np.take_along_axis(chosen_word, np.clip(word, 0, s - 1), axis=1)
    output_ids = _replace_chosen(input_ids, chosen, word, vocab_size, mask_id, rng)
    return {
        "input_ids": output_ids.astype(np.int64),
        **_predictions(input_ids, chosen, max_predictions_per_seq),
    }


def _words(input_ids, lengths, special_ids, is_continuation):
    """Maskable tokens [N, S] bool, their word index [N, S] (valid where maskable) and the words
    per row [N]: a word is one token or, with `is_continuation`, a piece and its "##" pieces."""
    n, s = input_ids.shape
    col = np.arange(s)[None, :]
    maskable = (col < lengths[:, None]) & ~np.isin(input_ids, list(special_ids))
    starts = maskable.copy()
    if is_continuation is not None:
        prev_maskable = np.concatenate([np.zeros((n, 1), bool), maskable[:, :-1]], axis=1)
        starts &= ~(is_continuation[input_ids] & prev_maskable)
    word = np.cumsum(starts, axis=1) - 1  # (N, S): word index of each token (valid where maskable)
    return maskable, word, starts.sum(axis=1)


def _choose_words(maskable, word, num_words, k, rng, whole_words):
    """Chosen words [N, W] bool: taken in random order while they fit in k [N] predictions."""
    n, s = maskable.shape
    rows = np.arange(n)[:, None]
    col = np.arange(s)[None, :]
    flat_word = (rows * s + word)[maskable]
    word_len = np.bincount(flat_word, minlength=n * s).reshape(n, s)  # (N, W): tokens per word
    keys = rng.random((n, s))
    keys[col >= num_words[:, None]] = np.inf
    order = np.argsort(keys, axis=1)  # (N, W): words in random order
    if whole_words:
        accepted = _fit_greedily(np.take_along_axis(word_len, order, axis=1), num_words, k)
    else:
        accepted = col < np.minimum(k, num_words)[:, None]
    chosen_word = np.zeros((n, s), bool)
    np.put_along_axis(chosen_word, order, accepted, axis=1)
    return chosen_word


def _fit_greedily(sorted_len, num_words, k):
    """Accepted [N, W] bool: each word (of sorted_len [N, W] tokens) if it still fits in k [N]."""
    n, s = sorted_len.shape
    accepted = np.zeros((n, s), bool)
    used = np.zeros(n, np.int64)
    for r in range(int(num_words.max(initial=0))):  # The original's loop, vectorized over rows.
        fits = (sorted_len[:, r] > 0) & (used + sorted_len[:, r] <= k)
        accepted[:, r] = fits
        used += np.where(fits, sorted_len[:, r], 0)
        if np.all(used >= k):
            break
    return accepted


def _replace_chosen(input_ids, chosen, word, vocab_size, mask_id, rng):
    """input_ids with each chosen word [MASK] (80%), kept (10%) or random ids (10%, per token)."""
    n, s = input_ids.shape
    action = np.take_along_axis(rng.random((n, s)), np.clip(word, 0, s - 1), axis=1)
    random_ids = rng.integers(0, vocab_size, (n, s))
    masked = np.where(action < 0.8, mask_id, np.where(action < 0.9, input_ids, random_ids))
    return np.where(chosen, masked, input_ids)


def _predictions(input_ids, chosen, max_predictions_per_seq):
    """masked_lm_positions, masked_lm_ids [N, P] int64 and masked_lm_weights [N, P] float32 of
    the chosen [N, S] tokens, in position order."""
    n = len(input_ids)
    r_idx, c_idx = np.nonzero(chosen)  # row-major: positions sorted within each row
    slot = np.cumsum(chosen, axis=1)[r_idx, c_idx] - 1
    positions = np.zeros((n, max_predictions_per_seq), np.int64)
    ids = np.zeros((n, max_predictions_per_seq), np.int64)
    weights = np.zeros((n, max_predictions_per_seq), np.float32)
    positions[r_idx, slot] = c_idx
    ids[r_idx, slot] = input_ids[r_idx, c_idx]
    weights[r_idx, slot] = 1.0
    return {"masked_lm_positions": positions, "masked_lm_ids": ids, "masked_lm_weights": weights}


def create_examples(
    chunk,
    max_seq_length,
    max_predictions_per_seq,
    masked_lm_prob,
    short_seq_prob,
    vocab_size,
    cls_id,
    sep_id,
    mask_id,
    pad_id,
    seed_sequence,
    is_continuation=None,
    sentence_order=False,
):
    """Creates one duplicate's examples from a chunk: pairs, truncation, packing, masking,
    shuffling.

    Args:
      chunk: TokenizedChunk.
      max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob: as the original
      flags. vocab_size, cls_id, sep_id, mask_id, pad_id: vocabulary facts.
      seed_sequence: np.random.SeedSequence, the only source of randomness.
      is_continuation: optional bool array [vocab_size] for whole-word masking.
      sentence_order: bool. ALBERT's sentence order pairs (`create_pairs`).

    Returns:
      dict of arrays with the original feature names: input_ids, input_mask, segment_ids [N, S],
      masked_lm_positions, masked_lm_ids, masked_lm_weights [N, P], next_sentence_labels [N, 1]
      (0 = IsNext, 1 = random next, or with `sentence_order` 1 = swapped).
    """
    py_seed, np_seed = seed_sequence.spawn(2)
    rng = random.Random(int(py_seed.generate_state(1, np.uint64)[0]))
    np_rng = np.random.default_rng(np_seed)
    pairs = create_pairs(chunk, max_seq_length, short_seq_prob, rng, sentence_order)
    pairs = truncate_pairs(pairs, max_seq_length - 3, np_rng)
    input_ids, segment_ids, lengths = pack_pairs(
        chunk.token_ids, pairs, max_seq_length, cls_id, sep_id, pad_id
    )
    vocabulary = (vocab_size, cls_id, sep_id, mask_id, pad_id)
    masking = (max_predictions_per_seq, masked_lm_prob, *vocabulary, np_rng, is_continuation)
    return masked_features(input_ids, segment_ids, lengths, pairs.is_random_next, *masking)


def masked_features(
    input_ids,
    segment_ids,
    lengths,
    next_sentence_labels,
    max_predictions_per_seq,
    masked_lm_prob,
    vocab_size,
    cls_id,
    sep_id,
    mask_id,
    pad_id,
    np_rng,
    is_continuation=None,
):
    """The features of rows ([N, S] ids and segment ids, [N] lengths and labels), masked
    (`mask_tokens`, never [CLS], [SEP] or padding) and shuffled by `np_rng`: the dict that
    `create_examples` returns."""
    features = mask_tokens(
        input_ids,
        lengths,
        max_predictions_per_seq,
        masked_lm_prob,
        vocab_size,
        mask_id,
        (cls_id, sep_id, pad_id),
        np_rng,
        is_continuation,
    )
    col = np.arange(input_ids.shape[1])[None, :]
    features["input_mask"] = (col < lengths[:, None]).astype(np.int64)
    features["segment_ids"] = segment_ids
    features["next_sentence_labels"] = np.asarray(next_sentence_labels, np.int64)[:, None]
    order = np_rng.permutation(len(lengths))
    return {name: value[order] for name, value in features.items()}
