"""int8 SavedModels (`export_saved_model(..., quantize="int8")`): oneDNN's products against NumPy
references of per-tensor and per-row int8, smoothing that leaves the float products unchanged,
answers near the float export's, served fresh as in-process, task.json, warmup records and the
errors."""

import json
import math
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import SQUAD_OPTIONS
from export_cases import TEXTS, TEXTS_B, keras_logits, write_task_model
from finetune_cases import TINY
from test_saved_model import _json_text

import keras_bert
from keras_bert.export import (
    export,
    export_saved_model,
    int8_saved_model,
    int8_smoothing,
    list_ops,
    single_request,
)
from keras_bert.export.saved_model import EXTRA_DIR
from keras_bert.export.source import load_source
from keras_bert.testing.served import serve_fresh

PRODUCT_OP = "_QuantizedMatMul"
# Calibration rows: the plain texts of TEXTS (a tab or line break cannot be in a row).
CALIBRATION = [t for t in TEXTS if isinstance(t, str) and t.strip() and "\t" not in t]


def numpy_gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def numpy_kernel(w):
    """W rounded per output channel to int8 (abs-max, 127 steps either side)."""
    w_max = np.abs(w).max(0)  # (N,)
    return np.round(w * (127.0 / w_max)) * (w_max / 127.0)


def numpy_tensor_product(x, w, low=None, width=None):
    """x W with x rounded to uint8 on one range (the tensor's min to max, 255 steps; or
    [low, low + width], x clipped to it)."""
    if low is None:
        low, width = x.min(), x.max() - x.min()
    x = np.clip(x, low, low + width)
    return (np.round((x - low) * (255.0 / width)) * (width / 255.0) + low) @ numpy_kernel(w)


def numpy_row_product(x, w, floor=None):
    """x W with each row of x rounded to uint8 on its own range (min to max, 255 steps; or
    `floor` to max)."""
    low = x.min(-1, keepdims=True) if floor is None else floor  # (M, 1)
    s = (x - low).max(-1, keepdims=True) + 1e-12  # (M, 1)
    return (np.round((x - low) * (255.0 / s)) * (s / 255.0) + low) @ numpy_kernel(w)


def _int8_dense(w, b):
    """A Dense of kernel w and bias b after Keras' quantize("int8"); (its kernel for
    `quantized_matmul`, the kernel's column sums in float)."""
    dense = keras.layers.Dense(w.shape[1])
    dense.build((None, w.shape[0]))
    dense.kernel.assign(w)
    dense.bias.assign(b)
    dense.quantize("int8")  # Keras' own per-channel int8 kernel and scale.
    channel_max = 127.0 / np.asarray(dense.kernel_scale).reshape(-1)
    sums = np.asarray(dense._kernel, np.float32).sum(0) * channel_max / 127.0
    kernel = (dense._kernel, tf.constant(channel_max, tf.float32), tf.constant(-channel_max))
    return kernel, tf.constant(sums)


@pytest.fixture(scope="module")
def product_case():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((21, 48)) * rng.uniform(0.1, 5, (21, 1))).astype(np.float32)
    x[:, 3] += 6.0  # An outlier channel; the tensor is not centred on 0.
    w = (rng.standard_normal((48, 40)) * rng.uniform(0.01, 1, (1, 40))).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    return x, w, b


@pytest.mark.parametrize("activation", [None, "GeluExact"])
def test_per_tensor_product_equals_the_numpy_reference(product_case, activation):
    x, w, b = product_case
    kernel, sums = _int8_dense(w, b)
    quantized, width, low, scale = int8_saved_model.quantize_tensor(
        tf.constant(x.reshape(3, 7, 48))
    )
    assert scale is None
    got = int8_saved_model.quantized_matmul(quantized, width, kernel, b + low * sums, activation)
    want = numpy_tensor_product(x, w) + b
    want = numpy_gelu(want) if activation else want
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, atol=3e-5 * scale)
    # The rounding shows: the float product is further away than the reference's tolerance.
    exact = x @ w + b
    assert np.abs((numpy_gelu(exact) if activation else exact) - want).max() > 30e-5 * scale


def test_per_row_product_equals_the_numpy_reference(product_case):
    x, w, b = product_case
    kernel, sums = _int8_dense(w, b)
    quantized, width, low, s = int8_saved_model.quantize_rows(tf.constant(x))
    got = int8_saved_model.quantized_matmul(quantized, width, kernel, 0 * sums) * s + low * sums
    want = numpy_row_product(x, w)
    np.testing.assert_allclose(got, want, atol=2e-5 * np.abs(want).max())
    # Per row holds the small rows that one range per tensor rounds away.
    tensor_error = np.abs(numpy_tensor_product(x, w) - x @ w).mean(-1)  # (M,)
    row_error = np.abs(want - x @ w).mean(-1)
    small = np.abs(x).max(-1) < np.median(np.abs(x).max(-1))  # The rows of smaller range.
    assert row_error[small].mean() < 0.75 * tensor_error[small].mean()


def test_per_tensor_product_on_a_constant_range_saturates_outside_it(product_case):
    """A calibrated range: values beyond it take its ends (no wrap-around)."""
    x, w, b = product_case
    kernel, sums = _int8_dense(w, b)
    low, width = float(np.percentile(x, 2)), float(np.percentile(x, 97) - np.percentile(x, 2))
    quantized, got_width, shift, scale = int8_saved_model.quantize_tensor(
        tf.constant(x), (low, width)
    )
    assert scale is None and (shift, got_width) == (low, width)
    got = int8_saved_model.quantized_matmul(quantized, width, kernel, b + low * sums)
    want = numpy_tensor_product(x, w, low, width) + b
    np.testing.assert_allclose(got, want, atol=3e-5 * np.abs(want).max())
    assert np.abs(numpy_tensor_product(x, w) + b - want).max() > 1e-2 * np.abs(want).max()


def test_per_row_product_from_an_activation_floor(product_case):
    """GELU's outputs, each row quantized from GELU's minimum (not its own) to its max."""
    x, w, _ = product_case
    x = numpy_gelu(x).astype(np.float32)
    kernel, sums = _int8_dense(w, np.zeros(w.shape[1], np.float32))
    floor = int8_saved_model.ACTIVATION_FLOORS["GeluExact"]
    assert floor <= x.min() and floor <= numpy_gelu(np.linspace(-3, 0, 3001)).min()
    quantized, width, low, s = int8_saved_model.quantize_rows(tf.constant(x), floor)
    got = int8_saved_model.quantized_matmul(quantized, width, kernel, 0 * sums) * s + low * sums
    want = numpy_row_product(x, w, floor)
    np.testing.assert_allclose(got, want, atol=2e-5 * np.abs(want).max())


def test_single_request_ops_equal_onednn_quantization_and_layer_norm():
    x = np.random.RandomState(0).uniform(-2.0, 3.0, (7, 16)).astype(np.float32)
    gamma, beta = np.linspace(0.5, 1.5, 16, dtype=np.float32), np.full(16, -0.25, np.float32)
    for quantize, argument in ((int8_saved_model.quantize_tensor, (-1.5, 4.0)), (None, None)):

        @tf.function
        def graph(x, quantize=quantize, argument=argument):
            if quantize is None:  # Per row: the quantizer of a product's rows.
                return int8_saved_model._uint8(tf.clip_by_value(x, 0.0, 2.5), 2.5)
            return quantize(x, argument)[0]

        onednn = graph(x)
        with single_request.small_ops():
            plain = tf.function(graph.python_function)(x)  # Traced again, in small ops.
        values = tf.bitcast(plain, tf.uint8).numpy()
        assert values.min() == 0 and values.max() == 255  # Saturated at both ends.
        np.testing.assert_array_equal(values, tf.bitcast(onednn, tf.uint8).numpy())
    want = tf.function(int8_saved_model.layer_norm)(x, gamma, beta, 1e-12)
    got = single_request.layer_norm(x, gamma, beta, 1e-12)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_fused_layer_norm_equals_numpy():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 5, 24)) * 4 + 1).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 2, 24), rng.standard_normal(24)
    got = int8_saved_model.layer_norm(
        tf.constant(x), tf.constant(gamma, tf.float32), tf.constant(beta, tf.float32), 1e-12
    )
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    want = (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta
    np.testing.assert_allclose(got, want, atol=2e-5 * np.abs(want).max())


def _tiny_encoder_case(seed, lengths):
    """A random tiny encoder, inputs of rows of `lengths` real tokens (padded to the longest),
    its float sequence_output, and its Dense layers but the pooler."""
    keras.utils.set_random_seed(seed)
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    shape = (len(lengths), max(lengths))
    ids = tf.constant(np.random.default_rng(seed).integers(1, TINY["vocab_size"], shape))
    inputs = {
        "input_word_ids": ids,
        "input_mask": tf.constant(np.arange(shape[1]) < np.array(lengths)[:, None], tf.int32),
        "input_type_ids": tf.zeros_like(ids),
    }
    want = np.asarray(encoder(inputs)["sequence_output"])
    dense = [layer for layer in encoder._flatten_layers() if isinstance(layer, keras.layers.Dense)]
    return encoder, inputs, want, [layer for layer in dense if layer.path != "pooler_dense"]


def test_smoothing_keeps_the_float_products_and_shares_a_factor_per_input():
    encoder, inputs, want, dense = _tiny_encoder_case(1, [9] * 4)
    kernels = {layer.path: np.asarray(layer.kernel) for layer in dense}
    recorder = int8_smoothing.InputRecorder().record(dense, lambda: encoder(inputs))
    assert all(type(layer) is keras.layers.Dense for layer in dense)  # Restored.
    # The query's input: the embeddings' LayerNorm output, recomputed here.
    embedded = encoder.get_layer("embeddings")(inputs["input_word_ids"], inputs["input_type_ids"])
    x_max = np.abs(np.asarray(embedded)).reshape(-1, TINY["hidden_size"]).max(0)
    np.testing.assert_allclose(recorder.maxima["layer_0/query"], x_max, rtol=1e-5)
    rows = np.asarray(embedded).reshape(-1, TINY["hidden_size"])
    np.testing.assert_allclose(recorder.lows["layer_0/query"], rows.min(0), rtol=1e-5)
    np.testing.assert_allclose(recorder.highs["layer_0/query"], rows.max(0), rtol=1e-5)
    assert recorder.groups["layer_0/key"] == recorder.groups["layer_0/value"] == "layer_0/query"
    factors = int8_smoothing.smooth(dense, recorder)
    shared = factors["layer_0/query"]
    assert factors["layer_0/key"] is shared and factors["layer_0/value"] is shared
    w_max = np.max([np.abs(kernels[f"layer_0/{n}"]).max(1) for n in ("query", "key", "value")], 0)
    np.testing.assert_allclose(1.0 / np.asarray(shared), np.sqrt(x_max / w_max), rtol=1e-4)
    # Inputs times the factor, kernels divided by it: the float model's answer is unchanged.
    for layer in dense:
        layer.kernel.assign(np.asarray(layer.kernel) * np.asarray(factors[layer.path])[:, None])
    np.testing.assert_allclose(encoder(inputs)["sequence_output"], want, atol=2e-5)
    assert not np.allclose(
        kernels["layer_0/intermediate_dense"]
        * np.asarray(factors["layer_0/intermediate_dense"])[:, None],
        kernels["layer_0/intermediate_dense"],
    )


class _SmoothedInputDense(keras.layers.Dense):
    """A float Dense whose input is multiplied by `_factor` first (what `Int8Dense` does)."""

    def call(self, inputs, training=None):
        return super().call(inputs * self._factor, training=training)


def test_the_attention_outputs_smoothing_folded_into_the_value_keeps_the_float_answer():
    encoder, inputs, want, dense = _tiny_encoder_case(4, [11, 7, 4])
    value = np.asarray(encoder.get_layer("layer_0").value.kernel)
    factors = int8_smoothing.smooth(
        dense, int8_smoothing.InputRecorder().record(dense, lambda: encoder(inputs))
    )
    blocks = [encoder.get_layer("layer_0")]
    assert int8_smoothing.fold_into_value(blocks, factors) == {"layer_0/attention_output_dense"}
    context_factor = np.asarray(factors["layer_0/attention_output_dense"])
    np.testing.assert_allclose(
        blocks[0].value.kernel,
        value * np.asarray(factors["layer_0/value"])[:, None] ** -1 * context_factor,
        rtol=1e-5,
    )
    for layer in dense:  # Inputs times their factor but the folded one's.
        folded = layer.path == "layer_0/attention_output_dense"
        layer._factor = np.float32(1.0) if folded else factors[layer.path]
        layer.__class__ = _SmoothedInputDense
    np.testing.assert_allclose(encoder(inputs)["sequence_output"], want, atol=3e-5)
    assert not np.allclose(context_factor, 1.0, atol=0.05)


def with_training_texts(model_dir, destination, rows):
    """A copy of a `model/` directory that records `rows` as its training texts."""
    shutil.copytree(model_dir, destination)
    with open(os.path.join(destination, "training_texts.tsv"), "w") as f:
        f.write("".join("\t".join(row) + "\n" for row in rows))
    with open(os.path.join(destination, "task.json")) as f:
        info = json.load(f)
    info["training_texts_file"] = "training_texts.tsv"
    with open(os.path.join(destination, "task.json"), "w") as f:
        json.dump(info, f)
    return str(destination)


class ReferenceInt8Dense(keras.layers.Dense):
    """An `Int8Dense` computed in float TensorFlow ops: the NumPy references' rounding, on the
    layer's constant range (per tensor, saturating) or floor (per row) where it has one."""

    def _int8_call(self, inputs, training=None):
        x = inputs if self._smoothing is None else inputs * self._smoothing
        if self._input_mode == "tensor":
            if self._input_range is None:
                low = tf.reduce_min(x)
                width = tf.reduce_max(x) - low
            else:
                low, width = self._input_range
                x = tf.clip_by_value(x, low, low + width)
            x = tf.round((x - low) * (255.0 / width)) * (width / 255.0) + low
        else:
            low = self._input_range
            if low is None:
                low = tf.reduce_min(x, -1, keepdims=True)
            s = tf.reduce_max(x - low, -1, keepdims=True) + 1e-12
            x = tf.round((x - low) * (255.0 / s)) * (s / 255.0) + low
        kernel = tf.cast(self._kernel, tf.float32) * (self._kernel_range / 127.0)
        outputs = tf.matmul(x, kernel) + self.bias
        if self._fused_activation:  # GeluExact in the tiny config.
            outputs = 0.5 * outputs * (1.0 + tf.math.erf(outputs / math.sqrt(2.0)))
        return outputs


def reference_int8_logits(model_dir, inputs):
    """Logits of the int8 copy of a task model, each int8 Dense as `ReferenceInt8Dense`."""
    model = int8_saved_model.int8_source(load_source(model_dir)).model
    for layer in model._flatten_layers():
        if isinstance(layer, int8_saved_model.Int8Dense):
            layer.__class__ = ReferenceInt8Dense
    return np.asarray(model(inputs, training=False)["logits"])


@pytest.fixture(scope="module")
def sst2_int8(sst2, tmp_path_factory):
    root = tmp_path_factory.mktemp("sst2_int8")
    model_dir = with_training_texts(sst2["model_dir"], root / "model", [(t,) for t in CALIBRATION])
    path = export_saved_model(model_dir, str(root / "serving"), quantize="int8")
    return dict(sst2, calibrated_dir=model_dir, int8=path)


def _close_not_equal(got, want, tolerance):
    """int8 answers: near the float ones (relative to their scale), but not bit-equal."""
    got, want = np.asarray(got), np.asarray(want)
    difference = np.abs(got - want).max()
    assert 0 < difference <= tolerance * max(np.abs(want).max(), 1e-3), difference


def test_int8_classifier_answers_near_the_float_model(sst2_int8):
    loaded = tf.saved_model.load(sst2_int8["int8"])
    inputs = loaded.signatures["preprocess"](text=tf.constant(TEXTS))
    logits = loaded.signatures["predict_ids"](**inputs)["logits"]
    reference = reference_int8_logits(sst2_int8["calibrated_dir"], inputs)
    np.testing.assert_allclose(logits, reference, atol=2e-4 * np.abs(reference).max())
    _close_not_equal(logits, keras_logits(sst2_int8["model_dir"], TEXTS), 0.15)
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    np.testing.assert_allclose(out["probabilities"], tf.nn.softmax(logits), atol=1e-5)
    # Every Dense of the encoder runs the oneDNN int8 product; the head stays a float MatMul.
    ops = list_ops(sst2_int8["int8"], "predict_ids")
    encoder = load_source(sst2_int8["model_dir"]).encoder
    dense = [layer for layer in encoder._flatten_layers() if isinstance(layer, keras.layers.Dense)]
    assert len(ops[PRODUCT_OP].nodes) == len(dense) - 1  # All but the pooler.
    assert "BatchMatMulV3" not in ops  # Keras' own int8 product (slow on CPUs) is not used.
    assert "Erf" not in ops  # GELU runs inside the intermediate product.
    # No range is reduced but each row's max of the feed-forward output's input (per tensor:
    # calibrated ranges; per row: from GELU's floor); each LayerNorm is one op.
    assert "Min" not in ops and len(ops["Max"].nodes) == 1
    assert len(ops["_MklLayerNorm"].nodes) == 3 and "SquaredDifference" not in ops


def test_int8_single_requests_run_plain_small_ops_with_the_batch_answers(sst2_int8):
    serve = tf.saved_model.load(sst2_int8["int8"]).signatures["serving_default"]
    batch = serve(text=tf.constant(TEXTS))["probabilities"]
    one = np.concatenate([serve(text=tf.constant([t]))["probabilities"] for t in TEXTS])
    # The same int8 products on the same ranges: only float rounding apart.
    np.testing.assert_allclose(one, batch, atol=0.01)
    # A batch of one: plain LayerNorm and rounding (`single_request`); others: oneDNN's ops.
    answer, batch_graph = (
        list_ops(sst2_int8["int8"], name) for name in ("serving_default", "predict_ids")
    )
    assert "Round" in answer and "Rsqrt" in answer
    assert "Round" not in batch_graph and "Rsqrt" not in batch_graph
    assert len(answer["_MklLayerNorm"].nodes) == len(batch_graph["_MklLayerNorm"].nodes) == 3


def test_int8_task_json_and_warmup_records(sst2_int8):
    with open(os.path.join(sst2_int8["int8"], EXTRA_DIR, "task.json")) as f:
        quantization = json.load(f)["quantization"]
    assert quantization["mode"] == "int8" and quantization["int8_dense_layers"] == 6
    assert quantization["float_dense_layers"] == ["classifier", "pooler_dense"]
    per_tensor = ("attention_output_dense", "intermediate_dense", "key", "query", "value")
    assert quantization["inputs"] == {
        "tensor": [f"layer_0/{name}" for name in per_tensor],
        "row": [],
        "floor": ["layer_0/output_dense"],
    }
    assert len(quantization["smoothed_inputs"]) == 6
    assert quantization["smoothing_in_value"] == ["layer_0/attention_output_dense"]
    ranges = quantization["calibrated_ranges"]
    assert list(ranges) == quantization["inputs"]["tensor"]  # By path, as the other lists.
    assert all(low <= 0 < width for low, width in ranges.values())
    floors = quantization["row_floors"]  # GELU's floor times the input's largest factor.
    assert list(floors) == ["layer_0/output_dense"] and floors["layer_0/output_dense"] < 0
    assert quantization["fused_layer_norms"] == 3
    assert quantization["calibration_texts"] == len(CALIBRATION)
    assert quantization["fused_activations"] == ["layer_0/intermediate_dense: GeluExact"]
    with open(os.path.join(sst2_int8["path"], EXTRA_DIR, "task.json")) as f:
        assert "quantization" not in json.load(f)  # The float export says nothing of it.
    records = tf.data.TFRecordDataset(
        os.path.join(sst2_int8["int8"], EXTRA_DIR, "tf_serving_warmup_requests")
    )
    assert sum(1 for _ in records) > 0


def test_unsmoothed_inputs_get_calibrated_ranges_too(sst2_int8):
    """smooth_layers matching none: per-tensor inputs on their own calibrated ranges."""
    source = int8_saved_model.int8_source(
        load_source(sst2_int8["calibrated_dir"]), smooth_layers="^$"
    )
    quantization = source.info["quantization"]
    assert quantization["smoothed_inputs"] == [] and quantization["smoothing_in_value"] == []
    assert sorted(quantization["calibrated_ranges"]) == quantization["inputs"]["tensor"] != []
    preprocess = tf.saved_model.load(sst2_int8["int8"]).signatures["preprocess"]
    logits = source.model(preprocess(text=tf.constant(TEXTS)), training=False)["logits"]
    _close_not_equal(logits, keras_logits(sst2_int8["model_dir"], TEXTS), 0.15)


def test_without_training_texts_every_input_is_quantized_per_row(sst2):
    source = int8_saved_model.int8_source(load_source(sst2["model_dir"]))
    quantization = source.info["quantization"]
    assert quantization["inputs"]["tensor"] == [] and len(quantization["inputs"]["row"]) == 5
    assert quantization["calibration_texts"] == 0 and quantization["smoothing_alpha"] is None
    assert quantization["smoothed_inputs"] == []
    int8 = [
        layer
        for layer in source.model._flatten_layers()
        if isinstance(layer, int8_saved_model.Int8Dense)
    ]
    assert {layer._input_mode for layer in int8} == {"row", "floor"}
    assert all(layer._smoothing is None for layer in int8)
    # The block's GELU moved into the intermediate layer (per row: after the scaling).
    assert any(layer._fused_activation == "GeluExact" for layer in int8)


def test_int8_served_fresh_equals_in_process(sst2_int8, tmp_path):
    texts = [_json_text(t) for t in TEXTS]
    (response,) = serve_fresh(sst2_int8["int8"], [{"inputs": {"text": texts}}], tmp_path)
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
    texts, others = CALIBRATION, [t for t in TEXTS_B if t.strip()]
    rows = [(t, others[i % len(others)]) for i, t in enumerate(texts)]  # stsb, squad1
    if task == "conll2003":
        rows = [(t,) for t in texts]
    elif task == "swag":
        rows = [
            (t, *(others[(i + j) % len(others)] for j in range(4))) for i, t in enumerate(texts)
        ]
    model_dir = with_training_texts(model_dir, tmp_path / "calibrated", rows)
    paths = {
        mode: export_saved_model(
            model_dir, str(tmp_path / mode), quantize=mode, warmup_requests=mode == "int8"
        )
        for mode in ("none", "int8")
    }
    info = json.load(open(os.path.join(paths["int8"], EXTRA_DIR, "task.json")))
    # SQuAD keeps the feed-forward output float (KIND_FLOAT_LAYERS).
    int8_layers = 5 if task == "squad1" else 6
    assert info["quantization"]["int8_dense_layers"] == int8_layers
    if task == "squad1":
        assert "layer_0/output_dense" in info["quantization"]["float_dense_layers"]
    # Calibrated on the rows; SQuAD and NER quantize every input per row (KIND_INPUT_MODES).
    per_tensor = 0 if task in ("conll2003", "squad1") else 5
    assert len(info["quantization"]["inputs"]["tensor"]) == per_tensor
    assert len(info["quantization"]["smoothed_inputs"]) == int8_layers
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
    assert len(list_ops(paths["int8"], "predict_ids")[PRODUCT_OP].nodes) == int8_layers
