"""int8 SavedModels (`export_saved_model(..., quantize="int8")`): the oneDNN product against a
NumPy reference of per-row / per-channel int8, answers near the float export's, served fresh as
in-process, task.json, warmup records and the errors."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import SQUAD_OPTIONS
from export_cases import TEXTS, TEXTS_B, keras_logits, write_task_model
from test_saved_model import _json_text, _serve_fresh

from keras_bert.export import export, export_saved_model, int8_saved_model, list_ops
from keras_bert.export.saved_model import EXTRA_DIR
from keras_bert.export.source import load_source

PRODUCT_OP = "QuantizedMatMulWithBiasAndDequantize"


def numpy_int8_product(x, w):
    """x W [M, N] with W rounded per output channel and x per row to int8 (abs-max, 127 steps
    either side for W, the uint8 grid x / s + 1 in [0, 2] for x): the independent reference."""
    w_max = np.abs(w).max(0)  # (N,)
    q_w = np.round(w * (127.0 / w_max))  # (K, N)
    s = np.abs(x).max(-1, keepdims=True) + 1e-12  # (M, 1)
    q_x = np.round((x / s + 1.0) * 127.5)  # (M, K) in [0, 255]
    return ((q_x / 127.5 - 1.0) * s) @ (q_w * (w_max / 127.0))


def test_int8_product_equals_the_numpy_reference():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 7, 48)) * rng.uniform(0.1, 5, (3, 7, 1))).astype(np.float32)
    w = (rng.standard_normal((48, 40)) * rng.uniform(0.01, 1, (1, 40))).astype(np.float32)
    dense = keras.layers.Dense(40, use_bias=False)
    dense.build((None, 48))
    dense.kernel.assign(w)
    dense.quantize("int8")  # Keras' own per-channel int8 kernel and scale.
    kernel = np.asarray(dense._kernel)
    sums = tf.constant(-kernel.astype(np.float32).sum(0) / 127.0)
    rows = int8_saved_model.quantize_rows(tf.constant(x))
    got = int8_saved_model.int8_product(rows, dense._kernel, dense.kernel_scale, sums)
    assert got.shape == (21, 40)
    want = numpy_int8_product(x.reshape(21, 48), w)
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, atol=2e-5 * scale)
    # The rounding shows: the float product is further away than the reference's tolerance.
    assert np.abs(x.reshape(21, 48) @ w - want).max() > 20 * 2e-5 * scale


class ReferenceInt8Dense(keras.layers.Dense):
    """An int8 Dense computing `numpy_int8_product`'s rounding in float TensorFlow ops."""

    def _int8_call(self, inputs, training=None):
        w_max = 127.0 / self.kernel_scale  # (N,)
        s = tf.reduce_max(tf.abs(inputs), -1, keepdims=True) + 1e-12
        x = (tf.round((inputs / s + 1.0) * 127.5) / 127.5 - 1.0) * s
        outputs = tf.matmul(x, tf.cast(self._kernel, tf.float32) * (w_max / 127.0))
        return self.activation(outputs + self.bias)


def reference_int8_logits(model_dir, inputs):
    """Logits of the int8 copy of a task model, each int8 Dense as `ReferenceInt8Dense`."""
    model = int8_saved_model.int8_copy(load_source(model_dir).model)
    for layer in model._flatten_layers():
        if isinstance(layer, int8_saved_model.Int8Dense):
            layer.__class__ = ReferenceInt8Dense
    return np.asarray(model(inputs, training=False)["logits"])


@pytest.fixture(scope="module")
def sst2_int8(sst2, tmp_path_factory):
    export_dir = str(tmp_path_factory.mktemp("sst2_int8"))
    return dict(sst2, int8=export_saved_model(sst2["model_dir"], export_dir, quantize="int8"))


def _close_not_equal(got, want, tolerance):
    """int8 answers: near the float ones (relative to their scale), but not bit-equal."""
    got, want = np.asarray(got), np.asarray(want)
    difference = np.abs(got - want).max()
    assert 0 < difference <= tolerance * max(np.abs(want).max(), 1e-3), difference


def test_int8_classifier_answers_near_the_float_model(sst2_int8):
    loaded = tf.saved_model.load(sst2_int8["int8"])
    inputs = loaded.signatures["preprocess"](text=tf.constant(TEXTS))
    logits = loaded.signatures["predict_ids"](**inputs)["logits"]
    reference = reference_int8_logits(sst2_int8["model_dir"], inputs)
    np.testing.assert_allclose(logits, reference, atol=1e-4 * np.abs(reference).max())
    _close_not_equal(logits, keras_logits(sst2_int8["model_dir"], TEXTS), 0.15)
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    np.testing.assert_allclose(out["probabilities"], tf.nn.softmax(logits), atol=1e-5)
    # Every Dense of the encoder runs the oneDNN int8 product; the head stays a float MatMul.
    ops = list_ops(sst2_int8["int8"], "predict_ids")
    encoder = load_source(sst2_int8["model_dir"]).encoder
    dense = [layer for layer in encoder._flatten_layers() if isinstance(layer, keras.layers.Dense)]
    assert len(ops[PRODUCT_OP].nodes) == len(dense) - 1  # All but the pooler.
    assert "BatchMatMulV3" not in ops  # Keras' own int8 product (slow on CPUs) is not used.


def test_int8_task_json_and_warmup_records(sst2_int8):
    with open(os.path.join(sst2_int8["int8"], EXTRA_DIR, "task.json")) as f:
        info = json.load(f)
    quantization = info["quantization"]
    assert quantization["mode"] == "int8" and quantization["int8_dense_layers"] == 6
    assert quantization["float_dense_layers"] == ["classifier", "pooler_dense"]
    with open(os.path.join(sst2_int8["path"], EXTRA_DIR, "task.json")) as f:
        assert "quantization" not in json.load(f)  # The float export says nothing of it.
    records = tf.data.TFRecordDataset(
        os.path.join(sst2_int8["int8"], EXTRA_DIR, "tf_serving_warmup_requests")
    )
    assert sum(1 for _ in records) > 0


def test_int8_served_fresh_equals_in_process(sst2_int8, tmp_path):
    texts = [_json_text(t) for t in TEXTS]
    (response,) = _serve_fresh(sst2_int8["int8"], [{"inputs": {"text": texts}}], tmp_path)
    want = tf.saved_model.load(sst2_int8["int8"]).signatures["serving_default"](
        text=tf.constant(TEXTS)
    )
    np.testing.assert_allclose(
        response["outputs"]["probabilities"], want["probabilities"], atol=1e-6
    )
    assert response["outputs"]["label_id"] == want["label_id"].numpy().tolist()


def test_bad_quantize_values_are_named(sst2, tmp_path):
    with pytest.raises(ValueError, match="format='saved_model' takes quantize 'none' or 'int8'"):
        export_saved_model(sst2["model_dir"], str(tmp_path / "a"), quantize="dynamic_range")
    with pytest.raises(ValueError, match="got 'int4'"):
        export(sst2["model_dir"], str(tmp_path / "b"), quantize="int4")
    with pytest.raises(ValueError, match="format='tflite' and 'saved_model' only"):
        export(sst2["model_dir"], str(tmp_path / "c"), format="hub", quantize="int8")
    assert not os.path.exists(tmp_path / "a")  # Refused before anything is written.


def _raw_outputs(path, inputs):
    """serving_default's answer keys, and predict_ids' outputs on preprocess' encoder inputs."""
    signatures = tf.saved_model.load(path).signatures
    answer = signatures["serving_default"](**inputs)
    encoded = signatures["preprocess"](**inputs)
    names = signatures["predict_ids"].structured_input_signature[1]
    outputs = signatures["predict_ids"](**{name: encoded[name] for name in names})
    return sorted(answer), {k: np.asarray(v) for k, v in outputs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("task", ["stsb", "conll2003", "squad1", "swag"])
def test_every_task_kind_exports_int8(task, tmp_path):
    options = SQUAD_OPTIONS if task == "squad1" else {}
    model_dir = write_task_model(tmp_path / "run", task, seed=3, **options)
    paths = {
        mode: export_saved_model(
            model_dir, str(tmp_path / mode), quantize=mode, warmup_requests=mode == "int8"
        )
        for mode in ("none", "int8")
    }
    info = json.load(open(os.path.join(paths["int8"], EXTRA_DIR, "task.json")))
    assert info["quantization"]["int8_dense_layers"] == 6
    assert os.path.exists(os.path.join(paths["int8"], EXTRA_DIR, "tf_serving_warmup_requests"))
    texts = tf.constant(TEXTS[:6])
    inputs = {"text": texts, "text_b": tf.constant(TEXTS_B[:6])}
    if task == "conll2003":
        inputs = {"text": texts}
    elif task == "squad1":
        inputs = {"question": texts, "context": tf.constant(TEXTS_B[:6])}
    elif task == "swag":
        inputs = {"context": texts, "endings": tf.stack([tf.constant(TEXTS_B[:6])] * 4, 1)}
    (keys, got), (want_keys, want) = (_raw_outputs(paths[m], inputs) for m in ("int8", "none"))
    assert keys == want_keys and sorted(got) == sorted(want)
    for key, value in want.items():  # (A tiny random SWAG model's saturated pooler can equal.)
        np.testing.assert_allclose(got[key], value, atol=0.15 * max(np.abs(value).max(), 1e-3))
    assert len(list_ops(paths["int8"], "predict_ids")[PRODUCT_OP].nodes) == 6
