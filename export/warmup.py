"""TF Serving warmup requests: `assets.extra/tf_serving_warmup_requests` of a SavedModel.

TF Serving replays this file when it loads a version, before the version takes traffic, so
that the first real requests do not pay for the lazy start of the runtime (the first call of a
signature costs seconds: graph optimisation, kernel and allocator set-up). The file is a
TFRecord of `tensorflow.serving.PredictionLog` protos, each a `PredictRequest` to
`serving_default`; TF Serving reads at most 1,000 of them.

`serving_default` pads each batch to its longest packed row (`text_inputs.trim_to_longest`),
so the shapes it sees are [B, S] for every width S from 2 ([CLS] [SEP]) to `seq_length`, at
every batch size B the server sends. The records cover both:

- every padded width once, at batch size 1 (cheap: a few seconds for MiniLM at 128);
- every batch size of `batch_sizes` at the widest padding, the costliest shapes, where the
  allocator grows to its peak (with `--tune_batching`, the measured `allowed_batch_sizes`).

Texts are made of vocabulary words (or, with `texts`, real texts: for each width the first
real row that packs to it, synthetic words where none does). The records are encoded with
the protobuf wire format directly (three nested messages around TensorFlow's own
`TensorProto`), so exporting needs no tensorflow-serving-api; the tests parse them with it.

Dimensions: B batch, S sequence, K texts per row of a [B, K] input.
"""

import os
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import tensorflow as tf

WARMUP_FILE = "tf_serving_warmup_requests"
MAX_RECORDS = 1000  # TF Serving reads no more.
BATCH_SIZES = (1, 2, 4, 8, 16, 32)  # Without a measured batching config.
# Real texts: rows of texts (a text, or a tuple of one per text column) or a file of them.
Texts: TypeAlias = Sequence[str | bytes] | Sequence[Sequence[str | bytes]] | str | os.PathLike[str]


def warmup_requests(functions, vocabulary, seq_length, batch_sizes=BATCH_SIZES, texts=None):
    """The warmup requests of an export: a list of {input name: NumPy strings [B] or [B, K]}.

    Args:
        functions: dict signature name -> tf.function (`serving_default` and `preprocess`).
        vocabulary: list of str, the model's WordPiece vocabulary (synthetic words from it).
        seq_length: int, the longest packed row.
        batch_sizes: ints, the batch sizes `serving_default` will be called with.
        texts: None, or rows of real texts (tuples of one text per text column), or a file of
            them (one row per line, columns tab-separated).

    Returns:
        list of dicts; at most `MAX_RECORDS`.
    """
    columns = text_columns(functions["serving_default"])
    rows = synthetic_rows(vocabulary, seq_length, sum(columns.values()))
    if texts is not None:
        rows = read_rows(texts, sum(columns.values())) + rows  # Real rows win each width.
    widths = row_widths(functions["preprocess"], columns, rows)
    first = {}
    for row, width in zip(rows, widths):
        first.setdefault(int(width), row)
    by_width = [first[w] for w in sorted(first)]
    if len(by_width) + len(batch_sizes) > MAX_RECORDS:  # Evenly spaced widths, longest kept.
        keep = np.linspace(0, len(by_width) - 1, MAX_RECORDS - len(batch_sizes)).round()
        by_width = [by_width[int(i)] for i in np.unique(keep)]
    widest = by_width[-1]
    requests = [as_request([row], columns) for row in by_width]
    requests += [as_request([widest] * b, columns) for b in sorted(set(batch_sizes)) if b > 1]
    return requests


def text_columns(function):
    """Input name -> texts per row (1 for strings [B], K for [B, K]), in signature order."""
    return {
        spec.name: 1 if spec.shape.rank == 1 else int(spec.shape[1])
        for spec in function.input_signature
    }


def read_rows(texts, width):
    """Rows of `width` texts from a list (of texts or tuples) or a file (tab-separated)."""
    if isinstance(texts, (str, os.PathLike)):
        with tf.io.gfile.GFile(os.fspath(texts)) as f:
            texts = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    rows = [tuple(t) if isinstance(t, (tuple, list)) else (t,) for t in texts]
    short = [i for i, row in enumerate(rows) if len(row) < width]
    if not rows or short:
        raise ValueError(
            f"Warmup texts need rows of {width} text(s) (tab-separated in a file); "
            + (f"row {short[0] + 1} has {len(rows[short[0]])}." if short else "none given.")
        )
    return [row[:width] for row in rows]


def synthetic_rows(vocabulary, seq_length, width):
    """Rows of n = 0..seq_length plain vocabulary words: all columns n words; or the first n
    and the others n - 1, or empty (pairs reach every width)."""
    words = [w for w in vocabulary if w.isascii() and w.isalpha() and w.islower()] or ["a"]

    def text(n, shift):
        return " ".join(words[(shift + i) % len(words)] for i in range(max(n, 0)))

    rows = []
    for n in range(seq_length + 1):
        rows.append(tuple(text(n, k) for k in range(width)))
        if width > 1:
            rows.append((text(n, 0),) + tuple(text(n - 1, k) for k in range(1, width)))
            rows.append((text(n, 0),) + ("",) * (width - 1))
    return rows


def row_widths(preprocess, columns, rows):
    """The padded width each row alone gets: its packed length (the longest of its windows or
    choices), from the export's own `preprocess`."""
    packed = preprocess(*[tf.constant(v) for v in as_request(rows, columns).values()])
    length = tf.reduce_sum(packed["input_mask"], axis=-1)  # (B,), (B, K) or (W,)
    if "example_index" in packed:  # SQuAD: windows [W] -> questions [B]
        length = tf.math.unsorted_segment_max(length, packed["example_index"], len(rows))
    elif length.shape.rank == 2:
        length = tf.reduce_max(length, axis=1)
    return np.maximum(length.numpy(), 2)


def as_request(rows, columns):
    """Rows of texts -> {input name: NumPy object array [B] or [B, K]}."""
    request, start = {}, 0
    for name, k in columns.items():
        values = [row[start] if k == 1 else list(row[start : start + k]) for row in rows]
        request[name] = np.array(values, dtype=object).reshape(
            (len(rows),) + ((k,) if k > 1 else ())
        )
        start += k
    return request


def write_warmup(path, requests, signature_name="serving_default"):
    """Writes `requests` as TFRecord PredictionLogs (PredictRequest) to `path`."""
    with tf.io.TFRecordWriter(path) as writer:
        for request in requests:
            writer.write(prediction_log(request, signature_name))


def prediction_log(request, signature_name):
    """The serialized `PredictionLog{predict_log{request{model_spec, inputs}}}` of a request.

    Protobuf wire format: a message field is (number << 3 | 2, byte length, bytes); a map
    entry is a message of key = 1, value = 2 (tensorflow_serving/apis/prediction_log.proto,
    predict.proto, model.proto)."""
    model_spec = _field(3, signature_name.encode())  # ModelSpec.signature_name
    inputs = b"".join(
        _field(
            2, _field(1, name.encode()) + _field(2, tf.make_tensor_proto(value).SerializeToString())
        )
        for name, value in sorted(request.items())
    )  # PredictRequest.inputs, map<string, TensorProto>
    predict_request = _field(1, model_spec) + inputs
    return _field(6, _field(1, predict_request))  # PredictionLog.predict_log.request


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
