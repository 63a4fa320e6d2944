"""Fast serialization of many fixed-schema `tf.train.Example`s at once (vectorized protobuf
encoding).

Building `tf.train.Example` objects in Python costs ~90 us per pre-training example; encoding the
same bytes with NumPy (varints for int64 lists, little-endian float32 for float lists) and joining a
few pieces per example costs a few microseconds. The bytes parse with `tf.io.parse_example` and
`tf.train.Example.FromString` like the protobuf library's own output.

Dimensions: N examples, L values per feature.
"""

import numpy as np


def _varint_sizes(values):
    """Bytes of the varint encoding of each non-negative int64 value."""
    sizes = np.ones(values.shape, np.int64)
    for k in range(1, 10):
        sizes += values >= (1 << (7 * k))
    return sizes


def _packed_varints(values):
    """Encodes int array [N, L] (values >= 0) as packed varints.

    Returns:
      (uint8 array of all rows' bytes concatenated, row byte offsets [N + 1]).
    """
    values = np.asarray(values, np.int64)
    if values.size and values.min() < 0:
        raise ValueError("Only non-negative int64 feature values are supported")
    if values.max(initial=0) < 128:  # One byte per value.
        return values.astype(np.uint8).reshape(-1), np.arange(len(values) + 1) * values.shape[1]
    flat = values.reshape(-1)
    num_bytes = _varint_sizes(flat)
    ends = np.cumsum(num_bytes)  # (N * L,): end of each value's bytes
    out = np.empty(int(ends[-1]) if len(ends) else 0, np.uint8)
    starts = ends - num_bytes
    for k in range(int(num_bytes.max(initial=1))):
        has = num_bytes > k
        group = (flat[has] >> (7 * k)) & 0x7F
        out[starts[has] + k] = group | np.where(num_bytes[has] > k + 1, 0x80, 0)
    row_bytes = num_bytes.reshape(values.shape).sum(axis=1)
    return out, np.concatenate([[0], np.cumsum(row_bytes)])


def _header(field_number, lengths):
    """Per-row bytes of a length-delimited field header (tag, varint length) and their total
    size."""
    data, offsets = _packed_varints(
        np.concatenate(
            [np.full((len(lengths), 1), (field_number << 3) | 2), lengths[:, None]], axis=1
        )
    )
    return (data, offsets), lengths + (offsets[1:] - offsets[:-1])


def _constant(n, data):
    data = np.frombuffer(data, np.uint8)
    return np.tile(data, n), np.arange(n + 1) * len(data)


def _concat_rows(pieces, n):
    """Row-wise concatenation of pieces, each (uint8 data, offsets [N + 1]). Returns (data,
    offsets)."""
    lengths = np.stack([offsets[1:] - offsets[:-1] for _, offsets in pieces], axis=1)  # (N, pieces)
    row_offsets = np.concatenate([[0], np.cumsum(lengths.sum(axis=1))])
    starts = row_offsets[:-1, None] + np.cumsum(lengths, axis=1) - lengths  # (N, pieces)
    out = np.empty(int(row_offsets[-1]), np.uint8)
    for p, (data, offsets) in enumerate(pieces):
        shift = np.repeat(starts[:, p] - offsets[:-1], lengths[:, p])
        out[np.arange(len(data)) + shift] = data
    return out, row_offsets


def serialize_examples(features):
    """Serializes a batch of examples with int64 and float32 features of fixed length.

    Args:
      features: dict name -> array [N, L] (integer dtypes become int64_list, floating dtypes
        float_list).

    Returns:
      list of N bytes, each a serialized `tf.train.Example`.
    """
    names = list(features)
    if not names:
        return []
    n = len(features[names[0]])
    if n == 0:
        return []
    pieces, body_len = [], np.zeros(n, np.int64)
    for name in names:
        value = np.asarray(features[name])
        if value.ndim != 2 or len(value) != n:
            raise ValueError(
                f"Feature {name!r} must have shape [N, L] with N={n}, got {value.shape}"
            )
        key = name.encode("utf-8")
        if np.issubdtype(value.dtype, np.floating):
            data = np.frombuffer(np.ascontiguousarray(value, "<f4").tobytes(), np.uint8)
            packed = (data, np.arange(n + 1) * value.shape[1] * 4)
            list_tag = 2  # Feature.float_list
        else:
            packed = _packed_varints(value)
            list_tag = 3  # Feature.int64_list
        list_header, list_len = _header(
            1, packed[1][1:] - packed[1][:-1]
        )  # Int64List/FloatList.value
        feature_header, feature_len = _header(list_tag, list_len)
        key_part = _constant(n, bytes([0x0A, len(key)]) + key)  # map entry key: field 1
        value_header, value_len = _header(2, feature_len)  # map entry value: field 2
        entry_header, entry_len = _header(1, len(key) + 2 + value_len)  # Features.feature: field 1
        pieces += [entry_header, key_part, value_header, feature_header, list_header, packed]
        body_len += entry_len
    example_header, _ = _header(1, body_len)  # Example.features: field 1
    data, offsets = _concat_rows([example_header] + pieces, n)
    data = data.tobytes()
    offsets = offsets.tolist()
    return [data[offsets[i] : offsets[i + 1]] for i in range(n)]
