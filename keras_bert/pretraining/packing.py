"""Packed pre-training rows: several instances per row, without cross-contamination.

Rows of the original format hold one instance each; short instances leave the rest of the row as
padding. Packing (Krell et al. 2021, "Efficient sequence packing without cross-contamination")
puts several instances into one row: each keeps its own positions (restarting at 0) and segment
ids, its tokens attend only to its own tokens (`BertEncoder.encode_packed` builds a
block-diagonal mask from the instance ids), its [CLS] feeds the next-sentence head and its masked
LM predictions move with it. A packed row gives each instance exactly the outputs and losses it
gets alone.

Dimensions: N instances, R packed rows, S max_seq_length, P max_predictions_per_seq (per
instance), I max_instances (per row), Q masked predictions per packed row.

Packed rows use the original feature names plus four (all int64 but `next_sentence_weights`):
- `input_ids`, `input_mask`, `segment_ids` [S]: as the original, the instances one after another.
- `position_ids` [S]: each token's position inside its instance (0 for padding).
- `instance_ids` [S]: 1, 2, ... for the tokens of the row's first, second, ... instance; 0 for
  padding.
- `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights` [Q]: the predictions of all the
  row's instances, positions counted in the row; `packed_predictions(...)` gives Q.
- `cls_positions` [I]: where each instance's [CLS] is (0 past the row's instances).
- `next_sentence_labels` [I] and float `next_sentence_weights` [I] (1.0 for real instances).
"""

import collections
import math

import numpy as np

PACKED_FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "position_ids",
    "instance_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "cls_positions",
    "next_sentence_labels",
    "next_sentence_weights",
)


def packed_predictions(max_seq_length, max_predictions_per_seq, masked_lm_prob, max_instances):
    """Q, the masked predictions a packed row can need: each instance predicts
    min(P, max(1, round(length * masked_lm_prob))) <= length * masked_lm_prob + 1 tokens."""
    return min(
        max_instances * max_predictions_per_seq,
        math.ceil(max_seq_length * masked_lm_prob) + max_instances,
    )


def first_fit_decreasing(lengths, capacity, max_instances=None):
    """Packs items into bins of `capacity` by first-fit-decreasing.

    Items are taken longest first (ties in index order); each goes into the first open bin with
    room for it (and fewer than `max_instances` items), or a new bin.

    Args:
      lengths: int array [N], each in [1, capacity].
      capacity: int.
      max_instances: optional int, the most items per bin.

    Returns:
      list of bins, each a list of item indices (in the order they were placed).
    """
    lengths = _checked(lengths, capacity)
    max_instances = max_instances or len(lengths) or 1
    room = np.full(len(lengths), -1, np.int64)  # (N,): room left in each bin (-1: not open / full)
    bins = []
    for item in np.argsort(-lengths, kind="stable"):
        fits = np.flatnonzero(room[: len(bins)] >= lengths[item])
        if len(fits):
            b = int(fits[0])
        else:
            b = len(bins)
            bins.append([])
            room[b] = capacity
        bins[b].append(int(item))
        room[b] -= lengths[item]
        if len(bins[b]) >= max_instances:
            room[b] = -1
    return bins


def shortest_pack_first(lengths, capacity, max_instances=None):
    """Packs items into bins by shortest-pack-first histogram packing (SPFHP, Krell et al. 2021).

    Works on the histogram of lengths: lengths are taken longest first, and all items of one
    length at once go into the open packs of one kind (the same lengths) with the least room that
    fits them (a kind whose count exceeds the items left is split), or into new packs. A pack is
    closed once full or holding `max_instances` items. Its cost grows with the number of distinct
    lengths and pack kinds, not with the number of items.

    Args and returns: as `first_fit_decreasing` (bins of item indices, the items of each length
    taken in index order).
    """
    lengths = _checked(lengths, capacity)
    max_instances = max_instances or len(lengths) or 1
    open_packs = {}  # room left -> list of [count, kind (tuple of lengths)]
    closed = []

    def add(kind, count, room):
        if room == 0 or len(kind) >= max_instances:
            closed.append([count, kind])
        else:
            open_packs.setdefault(room, []).append([count, kind])

    histogram = collections.Counter(lengths.tolist())
    for length in sorted(histogram, reverse=True):
        left = histogram[length]
        while left:
            fits = [room for room in open_packs if room >= length]
            if not fits:
                add((length,), left, capacity - length)
                break
            room = min(fits)
            count, kind = open_packs[room].pop()
            if not open_packs[room]:
                del open_packs[room]
            used = min(count, left)
            if count > used:
                open_packs.setdefault(room, []).append([count - used, kind])
            add((*kind, length), used, room - length)
            left -= used
    queues = collections.defaultdict(collections.deque)
    for item, length in enumerate(lengths.tolist()):
        queues[length].append(item)
    packs = closed + [pack for kinds in open_packs.values() for pack in kinds]
    return [[queues[n].popleft() for n in kind] for count, kind in packs for _ in range(count)]


def _checked(lengths, capacity):
    """`lengths` as an int64 array, each checked to lie in [1, capacity]."""
    lengths = np.asarray(lengths, np.int64)
    if lengths.size and (lengths.min() < 1 or lengths.max() > capacity):
        raise ValueError(
            f"Every length must be in [1, {capacity}], got {lengths.min()}..{lengths.max()}."
        )
    return lengths


ALGORITHMS = {"ffd": first_fit_decreasing, "spfhp": shortest_pack_first}


def efficiency(lengths, num_rows, max_seq_length):
    """Packing efficiency: real tokens / all tokens of `num_rows` rows of `max_seq_length`."""
    return float(np.sum(lengths)) / max(num_rows * max_seq_length, 1)


def pack_examples(features, max_instances, max_predictions, algorithm="ffd"):
    """Packs examples of the original format into packed rows.

    Args:
      features: dict of arrays of N unpacked examples with the original names (`input_ids`,
        `input_mask`, `segment_ids` [N, S], `masked_lm_positions`, `masked_lm_ids`,
        `masked_lm_weights` [N, P], `next_sentence_labels` [N, 1]), as
        `examples.create_examples` returns.
      max_instances: int I, the most instances per row.
      max_predictions: int Q, the masked predictions per packed row (`packed_predictions`).
      algorithm: "ffd" (`first_fit_decreasing`) or "spfhp" (`shortest_pack_first`).

    Returns:
      (dict of packed arrays with `PACKED_FEATURE_NAMES` (see the module docstring), R rows;
      the list of bins, each the example indices of one row in row order).

    Raises:
      ValueError: a row's predictions exceed `max_predictions`.
    """
    lengths = np.asarray(features["input_mask"]).sum(axis=1)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}.")
    bins = ALGORITHMS[algorithm](lengths, features["input_ids"].shape[1], max_instances)
    rows = [_pack_row(features, lengths, b, max_instances, max_predictions) for b in bins]
    packed = {name: np.stack([row[name] for row in rows]) for name in PACKED_FEATURE_NAMES}
    return packed, bins


def _pack_row(features, lengths, items, max_instances, max_predictions):
    """One packed row (dict of arrays [S], [Q] and [I]) of the examples `items`."""
    s = features["input_ids"].shape[1]
    row = {name: np.zeros(s, np.int64) for name in PACKED_FEATURE_NAMES[:5]}
    row["cls_positions"] = np.zeros(max_instances, np.int64)
    row["next_sentence_labels"] = np.zeros(max_instances, np.int64)
    row["next_sentence_weights"] = np.zeros(max_instances, np.float32)
    positions, ids, weights = [], [], []
    start = 0
    for k, item in enumerate(items):
        n = int(lengths[item])
        span = slice(start, start + n)
        row["input_ids"][span] = features["input_ids"][item, :n]
        row["input_mask"][span] = 1
        row["segment_ids"][span] = features["segment_ids"][item, :n]
        row["position_ids"][span] = np.arange(n)
        row["instance_ids"][span] = k + 1
        row["cls_positions"][k] = start
        row["next_sentence_labels"][k] = features["next_sentence_labels"][item, 0]
        row["next_sentence_weights"][k] = 1.0
        real = features["masked_lm_weights"][item] > 0
        positions.append(features["masked_lm_positions"][item][real] + start)
        ids.append(features["masked_lm_ids"][item][real])
        weights.append(features["masked_lm_weights"][item][real])
        start += n
    count = sum(len(p) for p in positions)
    if count > max_predictions:
        raise ValueError(f"A packed row has {count} masked predictions > {max_predictions}.")
    for name, parts, dtype in (
        ("masked_lm_positions", positions, np.int64),
        ("masked_lm_ids", ids, np.int64),
        ("masked_lm_weights", weights, np.float32),
    ):
        row[name] = np.zeros(max_predictions, dtype)
        row[name][:count] = np.concatenate(parts) if parts else []
    return row
