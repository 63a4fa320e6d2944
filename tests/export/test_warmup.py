"""TF Serving warmup records of SavedModel exports: PredictionLog protos (parsed with
tensorflow-serving-api), every padded width and batch size, replayed without keras or keras_bert
in a fresh process with the export's answers; real texts, off, bad texts."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from export_cases import SEQ_LENGTH, TEXTS, TEXTS_B

from keras_bert.export import export_saved_model, warmup

prediction_log_pb2 = pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2")
HERE = os.path.dirname(os.path.abspath(__file__))


def read_records(path):
    """The PredictRequests of an export's warmup file, as (signature name, {input: array})."""
    records = tf.data.TFRecordDataset(os.path.join(path, "assets.extra", warmup.WARMUP_FILE))
    requests = []
    for record in records:
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        assert log.WhichOneof("log_type") == "predict_log"
        request = log.predict_log.request
        requests.append(
            (
                request.model_spec.signature_name,
                {k: tf.make_ndarray(v) for k, v in request.inputs.items()},
            )
        )
    return requests


def padded_width(loaded, request):
    """The width serving_default pads this request to (its preprocess, the longest window)."""
    packed = loaded.signatures["preprocess"](**{k: tf.constant(v) for k, v in request.items()})
    return packed["input_word_ids"].shape[-1]


@pytest.mark.parametrize(
    "case, inputs",
    [("sst2", ["text"]), ("mnli", ["text", "text_b"]), ("swag", ["context", "endings"])],
)
def test_records_cover_every_padded_width_and_batch_size(case, inputs, request):
    export = request.getfixturevalue(case)
    requests = read_records(export["path"])
    loaded = tf.saved_model.load(export["path"])
    assert len(requests) <= warmup.MAX_RECORDS
    assert {name for name, _ in requests} == {"serving_default"}
    assert all(sorted(r) == sorted(inputs) for _, r in requests)
    sizes = [len(r[inputs[0]]) for _, r in requests]
    assert sorted(set(sizes)) == list(warmup.BATCH_SIZES)
    widths = [padded_width(loaded, r) for _, r in requests]
    # Every width serving_default can pad a batch to, alone; every batch size at the widest.
    assert sorted(w for w, b in zip(widths, sizes) if b == 1) == list(range(2, SEQ_LENGTH + 1))
    assert {w for w, b in zip(widths, sizes) if b > 1} == {SEQ_LENGTH}


def test_records_replay_without_keras_in_a_fresh_process(sst2, swag, tmp_path):
    """TF Serving's replay at load: every record answers, as the export does in this process."""
    paths = [sst2["path"], swag["path"]]
    out = str(tmp_path / "replayed.npz")
    subprocess.run(
        [
            sys.executable,
            os.path.join(HERE, "replay_warmup.py"),
            json.dumps({"saved_models": paths, "out": out}),
        ],
        check=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    replayed = np.load(out, allow_pickle=True)
    assert list(replayed["imported"]) == []  # Neither keras nor keras_bert nor tf-text's Python.
    for m, path in enumerate(paths):
        serving_default = tf.saved_model.load(path).signatures["serving_default"]
        for r, (_, request) in enumerate(read_records(path)):
            want = serving_default(**{k: tf.constant(v) for k, v in request.items()})
            for name, value in want.items():
                got = replayed[f"{m}/{r}/{name}"]
                if value.dtype.is_floating:
                    np.testing.assert_allclose(got, value.numpy(), atol=1e-6, rtol=0)
                else:
                    np.testing.assert_array_equal(got, value.numpy())


def test_wire_format_is_the_prediction_log_proto():
    request = {"text": np.array([b"a", "b\u00e9".encode()], dtype=object), "n": np.eye(2)}
    parsed = prediction_log_pb2.PredictionLog.FromString(
        warmup.prediction_log(request, "serving_default")
    )
    want = prediction_log_pb2.PredictionLog()
    want.predict_log.request.model_spec.signature_name = "serving_default"
    for name, value in request.items():
        want.predict_log.request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    assert parsed == want


def test_real_texts_come_first_and_warmup_can_be_off(mnli, tmp_path):
    rows_file = tmp_path / "pairs.tsv"
    rows_file.write_text("".join(f"{a}\t{b}\n" for a, b in zip(TEXTS[:3], TEXTS_B[:3])))
    path = export_saved_model(
        mnli["model_dir"], str(tmp_path / "real"), warmup_texts=str(rows_file)
    )
    requests = [r for _, r in read_records(path)]
    loaded = tf.saved_model.load(path)
    for a, b in zip(TEXTS[:3], TEXTS_B[:3]):  # Each real pair is the request of its width.
        width = padded_width(loaded, {"text": np.array([a]), "text_b": np.array([b])})
        (same,) = [r for r in requests if len(r["text"]) == 1 and padded_width(loaded, r) == width]
        assert (same["text"][0], same["text_b"][0]) == (a.encode(), b.encode())
    off = export_saved_model(mnli["model_dir"], str(tmp_path / "off"), warmup_requests=False)
    assert not os.path.exists(os.path.join(off, "assets.extra", warmup.WARMUP_FILE))
    assert os.path.exists(os.path.join(off, "assets.extra", "task.json"))


def test_bad_warmup_texts_are_named_and_nothing_is_written(mnli, tmp_path):
    rows_file = tmp_path / "single.txt"
    rows_file.write_text("only one text per row\n")
    with pytest.raises(ValueError, match=r"rows of 2 text\(s\).*row 1 has 1"):
        export_saved_model(
            mnli["model_dir"], str(tmp_path / "serving"), warmup_texts=str(rows_file)
        )
    assert not os.path.exists(tmp_path / "serving") or os.listdir(tmp_path / "serving") == []
