"""Dynamic masking in tf.data: masked LM predictions re-drawn every epoch (RoBERTa), seeded.

Dimensions: B batch, S sequence length, P max_predictions_per_seq, W words.

`dynamic_masking` maps batches of packed, unmasked token ids (from raw text through `pack_texts`,
RoBERTa's full-sentence rows through `full_sentence_rows`, or from TFRecords written without masks;
several instances per row through `pack_rows`) to the `(inputs, labels)` that `BertPretrainer.fit`
consumes, with the names of `keras_bert.pretraining.records`. Selection and scattering are
tensorflow-text's `mask_language_model` with a `RandomItemSelector` (its selection vectorized over
the batch) and a `MaskValuesChooser`, both drawing stateless random numbers from a per-batch seed
that `tf.data.Dataset.random(seed, rerandomize_each_iteration=True)` gives: the same seed gives the
same batches, every epoch gets new masks (an op-seeded random op in a `Dataset.map` would repeat
the same masks each epoch), and batches are masked in parallel without shared state.

Differences from the static (original) rules, as in tensorflow-text: the number of predictions is
ceil(masked_lm_prob * selectable items), items being tokens (or words with whole-word masking) other
than [CLS]/[SEP]/[PAD], capped at P; with whole-word masking the 80/10/10 choice is made per piece
and a word that would overshoot P is left unmasked.
"""

import collections
import functools

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert.pretraining import full_sentences, packing
from keras_bert.pretraining.examples import TokenizedChunk, continuation_pieces

# Packed rows' features that `dynamic_masking` passes through: inputs, then labels.
_PACKED_INPUTS = ("input_position_ids", "input_instance_ids", "cls_positions")
_PACKED_LABELS = ("next_sentence_labels", "next_sentence_weights")


class _StatelessRandom:
    """Stateless random numbers from one batch's seed [2]; each draw site gets its own stream."""

    def __init__(self, seed):
        self.seed = seed
        self.draws = 0

    def uniform(self, shape, minval=0, maxval=None, dtype=tf.float32):
        self.draws += 1  # Counted while tracing: a distinct, fixed seed per call site.
        seed = self.seed + tf.constant([0, self.draws], self.seed.dtype)
        return tf.random.stateless_uniform(shape, seed, minval, maxval, dtype)


class _SeededMaskValuesChooser(tf_text.MaskValuesChooser):
    """`MaskValuesChooser` drawing its random numbers from `random` (`uniform(shape, ...)`)."""

    def __init__(self, random, vocab_size, mask_token, mask_token_rate=0.8, random_token_rate=0.1):
        super().__init__(vocab_size, mask_token, mask_token_rate, random_token_rate)
        self.random = random

    def get_mask_values(self, masked_lm_ids):
        ids = masked_lm_ids.flat_values
        action = self.random.uniform(tf.shape(ids))
        random_ids = self.random.uniform(tf.shape(ids), 0, self.vocab_size, dtype=tf.int64)
        values = tf.where(
            action < self._mask_token_rate,
            tf.cast(self.mask_token, ids.dtype),
            tf.where(
                action < self._mask_token_rate + self.random_token_rate,
                tf.cast(random_ids, ids.dtype),
                ids,
            ),
        )
        return masked_lm_ids.with_flat_values(values)


class _SeededItemSelector(tf_text.RandomItemSelector):
    """`RandomItemSelector` along axis 1 drawing from `random`, vectorized over the batch.

    Same rule as the parent (ceil(selection_rate * selectable items), at most
    max_selections_per_batch, uniformly at random) without its per-row `map_fn`: each selectable
    item gets a uniform key and the rows' smallest keys are chosen.
    """

    def __init__(self, random, max_selections_per_batch, selection_rate, unselectable_ids):
        super().__init__(max_selections_per_batch, selection_rate, unselectable_ids)
        self.random = random

    def get_selection_mask(self, input_ids, axis=1):
        if axis != 1:
            raise ValueError(f"Only axis=1 is supported, got {axis}")
        selectable = self.get_selectable(input_ids, axis)  # (B, (W)) bool
        keys = tf.where(
            selectable.flat_values, self.random.uniform(tf.shape(selectable.flat_values)), 2.0
        )
        keys = selectable.with_flat_values(keys).to_tensor(3.0)  # (B, W_max)
        ranks = tf.argsort(tf.argsort(keys, axis=1), axis=1)  # (B, W_max): rank of each item's key
        count = tf.reduce_sum(tf.cast(selectable, tf.float32), axis=1)  # (B,)
        num = tf.minimum(
            tf.math.ceil(count * self.selection_rate), float(self.max_selections_per_batch)
        )
        chosen = ranks < tf.cast(num, tf.int32)[:, None]
        return tf.RaggedTensor.from_tensor(chosen, lengths=selectable.row_lengths())


def _vocabulary_facts(vocabulary):
    tokens = getattr(vocabulary, "vocabulary", None)
    if tokens is None:
        from keras_bert.text.vocab import load_vocabulary

        tokens = load_vocabulary(vocabulary)
    tokens = list(tokens)
    index = {t: i for i, t in enumerate(tokens)}
    missing = [t for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]") if t not in index]
    if missing:
        raise ValueError(f"The vocabulary lacks {missing}")
    return tokens, index


def _words(ragged_ids, is_continuation, special_ids):
    """[B, (T)] ids -> [B, (W), (pieces)]: a "##" piece joins the word before it (not after a
    special)."""
    flat = ragged_ids.flat_values  # (T,)
    first_in_row = tf.equal(
        tf.range(tf.size(flat, out_type=tf.int64)),
        tf.gather(ragged_ids.row_starts(), ragged_ids.value_rowids()),
    )
    prev = tf.concat([tf.zeros([1], flat.dtype), flat[:-1]], axis=0)
    prev_special = tf.reduce_any(
        tf.equal(prev[:, None], tf.constant(special_ids, flat.dtype)[None, :]), -1
    )
    starts = ~tf.gather(is_continuation, flat) | first_in_row | prev_special  # (T,)
    word_ids = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    words = tf.RaggedTensor.from_value_rowids(flat, word_ids)  # (W_total, (pieces))
    words_per_row = tf.math.unsorted_segment_sum(
        tf.cast(starts, tf.int64), ragged_ids.value_rowids(), ragged_ids.nrows()
    )
    return tf.RaggedTensor.from_row_lengths(words, words_per_row), word_ids


def pack_texts(dataset, tokenizer, seq_length):
    """Batches of raw text -> packed ids for `dynamic_masking` (tokenized and packed in-graph).

    Args:
      dataset: tf.data.Dataset of batched tf.string [B] (one text per row: [CLS] text [SEP]) or of
        (text_a, text_b) tuples ([CLS] a [SEP] b [SEP]), or of ((text_a, text_b), labels [B])
        (from `sentence_order_texts`; the labels pass on as `next_sentence_labels`).
      tokenizer: `keras_bert.text.BertTokenizer`.
      seq_length: int S; longer rows are truncated longest-first as the original.

    Returns:
      tf.data.Dataset of dicts input_word_ids, input_mask, input_type_ids int32 [B, S] (and
      next_sentence_labels [B] when the dataset has labels).
    """
    from keras_bert.text.packer import BertPacker

    packer = BertPacker(
        seq_length, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id
    )

    def pack(*texts):
        return packer(tuple(tokenizer(t) for t in texts))

    def pack_labelled(texts, labels):
        return dict(pack(*texts), next_sentence_labels=labels)

    spec = dataset.element_spec
    labelled = isinstance(spec, tuple) and isinstance(spec[0], tuple)
    return dataset.map(pack_labelled if labelled else pack, num_parallel_calls=tf.data.AUTOTUNE)


def sentence_order_texts(dataset, seed=0):
    """Batches of consecutive segments (text_a, text_b) -> ((first, second), labels [B]) for
    ALBERT's sentence order prediction: each pair swapped with probability 0.5 (label 1), by a
    stateless per-batch seed (the same seed gives the same pairs; every epoch new ones).
    `pack_texts` packs the result with its labels for `dynamic_masking`."""
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)

    def swap(pair, batch_seed):
        a, b = pair
        swapped = tf.random.stateless_uniform(tf.shape(a), seed=batch_seed) < 0.5
        return (tf.where(swapped, b, a), tf.where(swapped, a, b)), tf.cast(swapped, tf.int32)

    return tf.data.Dataset.zip((dataset, seeds)).map(swap)


def full_sentence_rows(dataset, tokenizer, seq_length, seed=0):
    """Batches of sentences -> RoBERTa's full-sentence rows for objective "mlm"
    (`keras_bert.pretraining.full_sentences`): [CLS] sentences [SEP], taken contiguously up to
    `seq_length`, an extra [SEP] between two documents, one segment. Rows do not cross batches
    (batch whole documents, or many sentences); a sentence longer than a row is truncated at random
    as the original, by a per-batch seed (the same seed gives the same rows; each epoch new cuts).

    Args:
      dataset: tf.data.Dataset of batched (sentences tf.string [K], document ids int [K]), the
        sentences in corpus order; a new document id starts a new document.
      tokenizer: `keras_bert.text.BertTokenizer`.
      seq_length: int S.
      seed: int.

    Returns:
      tf.data.Dataset of unbatched dicts input_word_ids, input_mask, input_type_ids (0) int32 [S]:
      batch them, then mask them with `dynamic_masking` and train `BertPretrainer(encoder,
      next_sentence=False)` (`--objective=mlm`).
    """
    ids = (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)

    def rows_of(tokens, sentence_lengths, documents, batch_seed):
        change = np.flatnonzero(np.diff(documents)) + 1
        per_document = np.diff(np.concatenate([[0], change, [len(documents)]]))
        chunk = TokenizedChunk.from_sentence_lengths(tokens, sentence_lengths, per_document)
        rows = full_sentences.fill_rows(chunk, seq_length)
        rng = np.random.default_rng(int(batch_seed) % 2**63)
        input_ids, lengths = full_sentences.row_ids(chunk, rows, seq_length, *ids, rng)
        mask = np.arange(seq_length)[None, :] < lengths[:, None]
        return input_ids.astype(np.int32), mask.astype(np.int32)

    def rows(batch, batch_seed):
        sentences, documents = batch
        pieces = tokenizer(sentences)  # (K, (T))
        input_ids, input_mask = tf.numpy_function(
            rows_of,
            [pieces.flat_values, pieces.row_lengths(), tf.cast(documents, tf.int64), batch_seed],
            [tf.int32, tf.int32],
        )
        input_ids.set_shape([None, seq_length])
        input_mask.set_shape([None, seq_length])
        return tf.data.Dataset.from_tensor_slices(
            dict(
                input_word_ids=input_ids,
                input_mask=input_mask,
                input_type_ids=tf.zeros_like(input_ids),
            )
        )

    return tf.data.Dataset.zip(dataset, seeds).flat_map(rows)


def pack_rows(dataset, max_instances=4):
    """Batches of rows -> packed rows, several instances each (`keras_bert.pretraining.packing`).

    Each batch of K rows is packed on its own by first-fit-decreasing (a larger K packs tighter);
    the result holds one element per packed row: batch it again, then mask it with
    `dynamic_masking` (with `max_predictions_per_seq` for a whole packed row) and train
    `BertPretrainer(packed=True)` on it.

    Args:
      dataset: tf.data.Dataset of batched dicts of `pack_texts`: input_word_ids, input_mask,
        input_type_ids [K, S], optionally next_sentence_labels [K] or [K, 1].
      max_instances: int I, the most instances per packed row.

    Returns:
      tf.data.Dataset of unbatched dicts: input_word_ids, input_mask, input_type_ids,
      input_position_ids, input_instance_ids int32 [S], cls_positions int32 [I] and, when given,
      next_sentence_labels int32 [I] with next_sentence_weights float32 [I].
    """
    names = ("input_ids", "input_mask", "segment_ids", "position_ids", "instance_ids")
    names += ("cls_positions", "next_sentence_labels", "next_sentence_weights")
    keys = ("input_word_ids", "input_mask", "input_type_ids", *_PACKED_INPUTS, *_PACKED_LABELS)

    def pack_batch(ids, mask, types, labels):
        empty = np.zeros((len(ids), 0), np.int64)
        features = dict(input_ids=ids, input_mask=mask, segment_ids=types)
        features.update(masked_lm_positions=empty, masked_lm_ids=empty)
        features.update(masked_lm_weights=empty.astype(np.float32))
        features["next_sentence_labels"] = labels.reshape(-1, 1)
        packed, _ = packing.pack_examples(features, max_instances, 0)
        return [
            packed[name].astype(np.float32 if "weights" in name else np.int32) for name in names
        ]

    def pack(element):
        has_labels = "next_sentence_labels" in element
        ids = element["input_word_ids"]
        labels = element.get("next_sentence_labels", tf.zeros(tf.shape(ids)[:1], tf.int32))
        args = [
            tf.cast(t, tf.int64) for t in (ids, element["input_mask"], element["input_type_ids"])
        ]
        out = tf.numpy_function(
            pack_batch, [*args, tf.cast(labels, tf.int64)], [tf.int32] * 7 + [tf.float32]
        )
        rows = {}
        for key, value in zip(keys, out):
            width = max_instances if key in (*_PACKED_LABELS, "cls_positions") else ids.shape[1]
            value.set_shape([None, width])
            rows[key] = value
        if not has_labels:
            rows = {k: v for k, v in rows.items() if k not in _PACKED_LABELS}
        return tf.data.Dataset.from_tensor_slices(rows)

    return dataset.flat_map(pack)


def dynamic_masking(
    dataset,
    vocabulary,
    max_predictions_per_seq=20,
    masked_lm_prob=0.15,
    whole_word_masking=False,
    mask_token_rate=0.8,
    random_token_rate=0.1,
    seed=0,
):
    """Masks batches of packed ids afresh every time the dataset is iterated.

    Args:
      dataset: tf.data.Dataset of batched dicts (or (inputs, labels) tuples of dicts) with
        `input_word_ids` (or `input_ids`) [B, S]; optional `input_mask` (default: ids != [PAD]),
        `input_type_ids` (or `segment_ids`, default 0) and `next_sentence_labels` [B] or [B, 1]
        (0 = IsNext, 1 = random; left out of the labels when absent, for `next_sentence=False`).
      vocabulary: a `keras_bert.text.BertTokenizer`, a list of tokens or a vocab.txt path.
      max_predictions_per_seq: int P.
      masked_lm_prob: float, the share of selectable tokens (or words) to predict.
      whole_word_masking: bool, select all "##" pieces of a word together.
      mask_token_rate: float, share of predictions replaced by [MASK] (0.8).
      random_token_rate: float, share replaced by a random id (0.1); the rest stay unchanged.
      seed: int, seeds all choices (through the per-batch seeds).

    Returns:
      tf.data.Dataset of (inputs, labels): inputs input_word_ids (masked), input_mask,
      input_type_ids int32 [B, S], masked_lm_positions int32 [B, P]; labels masked_lm_ids
      int32 [B, P], masked_lm_weights float32 [B, P] and next_sentence_labels int32 [B, 1] when
      given. Packed rows (from `pack_rows`) keep input_position_ids, input_instance_ids,
      cls_positions and next_sentence_labels / next_sentence_weights [B, I], without input_mask.
    """
    _check_rates(masked_lm_prob, max_predictions_per_seq, mask_token_rate, random_token_rate)
    tokens, index = _vocabulary_facts(vocabulary)
    pad_id, cls_id, sep_id, mask_id = (index[t] for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]"))
    spec = _MaskingSpec(
        max_predictions_per_seq,
        masked_lm_prob,
        whole_word_masking,
        mask_token_rate,
        random_token_rate,
        len(tokens),
        pad_id,
        mask_id,
        [cls_id, sep_id, pad_id],
        tf.constant(continuation_pieces(tokens)),
    )
    mask_batch = functools.partial(_mask_batch, spec)

    # One seed [2] per batch, new every time the dataset is iterated (so every epoch), fixed by
    # `seed`.
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return tf.data.Dataset.zip(seeds, dataset).map(
        mask_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )


def _check_rates(masked_lm_prob, max_predictions_per_seq, mask_token_rate, random_token_rate):
    """Raises ValueError naming a masking setting out of its range."""
    if not 0.0 < masked_lm_prob <= 1.0:
        raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}")
    if max_predictions_per_seq < 1:
        raise ValueError(f"max_predictions_per_seq must be >= 1, got {max_predictions_per_seq}")
    if mask_token_rate < 0 or random_token_rate < 0 or mask_token_rate + random_token_rate > 1:
        raise ValueError(
            "mask_token_rate and random_token_rate must be >= 0 with a sum <= 1, got "
            f"{mask_token_rate} and {random_token_rate}"
        )


# The settings `_mask_batch` reads (those of `dynamic_masking`, with the vocabulary's ids).
_MaskingSpec = collections.namedtuple(
    "_MaskingSpec",
    (
        "max_predictions",
        "masked_lm_prob",
        "whole_word_masking",
        "mask_token_rate",
        "random_token_rate",
        "vocab_size",
        "pad_id",
        "mask_id",
        "special_ids",
        "is_continuation",
    ),
)


def _batch_features(element):
    """(features dict, key of the word ids) of a dataset element: a dict or a tuple of dicts."""
    if not isinstance(element, tuple):
        element = (element,)
    features = dict(element[0])
    if len(element) > 1:
        features.update(element[1])
    word_key = "input_word_ids" if "input_word_ids" in features else "input_ids"
    if word_key not in features:
        raise KeyError(f"dynamic_masking needs input_word_ids or input_ids; got {sorted(features)}")
    return features, word_key


def _mask_batch(spec, seed, element):
    """One batch of `dynamic_masking`, masked with the per-batch `seed` [2]."""
    P = spec.max_predictions
    random = _StatelessRandom(seed)
    selector = _SeededItemSelector(random, P, spec.masked_lm_prob, spec.special_ids)
    chooser = _SeededMaskValuesChooser(
        random, spec.vocab_size, spec.mask_id, spec.mask_token_rate, spec.random_token_rate
    )
    features, word_key = _batch_features(element)
    ids = tf.cast(features[word_key], tf.int64)  # (B, S)
    if ids.shape.rank != 2:
        raise ValueError(f"{word_key} must be batched ids [B, S], got shape {ids.shape}")
    input_mask = tf.cast(features.get("input_mask", tf.not_equal(ids, spec.pad_id)), tf.int32)
    type_ids = features.get("input_type_ids", features.get("segment_ids", tf.zeros_like(ids)))
    ragged = tf.RaggedTensor.from_tensor(ids, lengths=tf.reduce_sum(input_mask, axis=1))  # (B, (T))
    items = ragged
    if spec.whole_word_masking:
        items, word_ids = _words(ragged, spec.is_continuation, spec.special_ids)
    masked, positions, masked_ids = tf_text.mask_language_model(items, selector, chooser, axis=1)
    new_ids = tf.where(tf.cast(input_mask, bool), masked.to_tensor(0, shape=tf.shape(ids)), ids)
    if spec.whole_word_masking:
        new_ids, positions, masked_ids = _whole_words_within(
            P, ids, new_ids, ragged, word_ids, positions, masked_ids
        )
    positions, masked_ids = positions[:, :P], masked_ids[:, :P]
    shape = tf.stack([tf.shape(ids, out_type=tf.int64)[0], P])
    inputs = {
        "input_word_ids": tf.cast(new_ids, tf.int32),
        "input_mask": input_mask,
        "input_type_ids": tf.cast(type_ids, tf.int32),
        "masked_lm_positions": tf.cast(positions.to_tensor(0, shape=shape), tf.int32),
    }
    labels = {
        "masked_lm_ids": tf.cast(masked_ids.to_tensor(0, shape=shape), tf.int32),
        "masked_lm_weights": tf.ones_like(positions, tf.float32).to_tensor(0.0, shape=shape),
    }
    if "input_instance_ids" in features:  # Packed rows (`pack_rows`).
        del inputs["input_mask"]
        inputs.update({k: tf.cast(features[k], tf.int32) for k in _PACKED_INPUTS})
        labels.update({k: features[k] for k in _PACKED_LABELS if k in features})
    elif "next_sentence_labels" in features:
        labels["next_sentence_labels"] = tf.reshape(
            tf.cast(features["next_sentence_labels"], tf.int32), [-1, 1]
        )
    return inputs, labels


def _whole_words_within(P, ids, new_ids, ragged, word_ids, positions, masked_ids):
    """(new_ids, positions, masked_ids) without the word that would overshoot P predictions:
    all its pieces are left unmasked."""
    position_words = tf.gather(word_ids, ragged.row_starts()[:, None] + positions)  # (B, (k))
    overshoot = tf.where(
        position_words.row_lengths() > P,
        position_words[:, P:].to_tensor(-1, shape=[None, 1])[:, 0],
        -1,
    )
    keep = tf.not_equal(position_words, overshoot[:, None])
    keep = tf.logical_and(keep, tf.ragged.range(positions.row_lengths()) < P)
    extra = tf.ragged.boolean_mask(positions, ~keep)
    indices = tf.stack([extra.value_rowids(), extra.flat_values], axis=1)  # (E, 2)
    new_ids = tf.tensor_scatter_nd_update(new_ids, indices, tf.gather_nd(ids, indices))
    return (
        new_ids,
        tf.ragged.boolean_mask(positions, keep),
        tf.ragged.boolean_mask(masked_ids, keep),
    )
