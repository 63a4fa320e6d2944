"""SavedModels for TF Serving: the answers of the Keras model, versions, the serving contract
(fresh process, REST bodies, saved_model_cli), the op check, and encoders."""

import base64
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from export_cases import SEQ_LENGTH, TEXTS, TEXTS_B, keras_logits, softmax, write_task_model
from finetune_cases import TINY

import keras_bert
from keras_bert.export import OpCheckError, export_saved_model, list_ops, ops, versions
from keras_bert.export.saved_model import write_saved_model
from keras_bert.export.source import load_source
from keras_bert.models.encoder import encoder_inputs
from keras_bert.testing.served import serve_fresh
from keras_bert.text.preprocessor import BertPreprocessor

HERE = os.path.dirname(os.path.abspath(__file__))
ATOL = 1e-5


def test_sentence_classifier_answers_as_the_keras_model(sst2):
    loaded = tf.saved_model.load(sst2["path"])
    assert sorted(loaded.signatures) == ["predict_ids", "preprocess", "serving_default"]
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    want = softmax(keras_logits(sst2["model_dir"], TEXTS))
    np.testing.assert_allclose(out["probabilities"], want, atol=ATOL)
    np.testing.assert_array_equal(out["label_id"], want.argmax(-1))
    assert [s.decode() for s in out["label"].numpy()] == [["0", "1"][i] for i in want.argmax(-1)]
    assert len(set(want.argmax(-1))) == 2  # Both labels occur: the check can tell them apart.
    # predict_ids(preprocess(x)) gives the logits; preprocess pads only to the batch's longest row.
    inputs = loaded.signatures["preprocess"](text=tf.constant(TEXTS[:2]))
    assert inputs["input_word_ids"].shape == (
        2,
        int(tf.reduce_max(tf.reduce_sum(inputs["input_mask"], 1))),
    )
    logits = loaded.signatures["predict_ids"](**inputs)["logits"]
    np.testing.assert_allclose(logits, keras_logits(sst2["model_dir"], TEXTS[:2]), atol=ATOL)


def test_pair_classifier_and_regression_answers(mnli, stsb):
    pairs = dict(text=tf.constant(TEXTS), text_b=tf.constant(TEXTS_B))
    out = tf.saved_model.load(mnli["path"]).signatures["serving_default"](**pairs)
    want = softmax(keras_logits(mnli["model_dir"], TEXTS, TEXTS_B))
    assert out["probabilities"].shape == (len(TEXTS), 3)
    np.testing.assert_allclose(out["probabilities"], want, atol=ATOL)
    labels = ["contradiction", "entailment", "neutral"]
    assert [s.decode() for s in out["label"].numpy()] == [labels[i] for i in want.argmax(-1)]
    score = tf.saved_model.load(stsb["path"]).signatures["serving_default"](**pairs)
    assert sorted(score) == ["score"]
    np.testing.assert_allclose(
        score["score"], keras_logits(stsb["model_dir"], TEXTS, TEXTS_B)[:, 0], atol=ATOL
    )


def test_export_facts_and_layout(sst2):
    assert versions.versions(sst2["export_dir"]) == [1] and sst2["path"].endswith(os.sep + "1")
    assert sorted(os.listdir(sst2["export_dir"])) == ["1"]  # No temporary directory left.
    with open(os.path.join(sst2["path"], "assets.extra", "task.json")) as f:
        info = json.load(f)
    assert (info["task"], info["kind"], info["seq_length"], info["labels"]) == (
        "sst2",
        "classification",
        32,
        ["0", "1"],
    )
    assert info["signatures"] == {
        "serving_default": ["text"],
        "preprocess": ["text"],
        "predict_ids": ["input_mask", "input_type_ids", "input_word_ids"],
    }


def test_versions_increment_and_are_never_overwritten(sst2, tmp_path):
    export_dir = str(tmp_path / "serving")
    for expected in (1, 2):
        with versions.new_version(export_dir) as (tmp, final):
            assert final == os.path.join(export_dir, str(expected)) and not os.path.exists(final)
            open(os.path.join(tmp, "file"), "w").close()
    assert versions.versions(export_dir) == [1, 2] and sorted(os.listdir(export_dir)) == ["1", "2"]
    with pytest.raises(FileExistsError, match="never overwritten"):
        with versions.new_version(export_dir, version=2):
            pass
    before = open(os.path.join(sst2["path"], "saved_model.pb"), "rb").read()
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_saved_model(sst2["model_dir"], sst2["export_dir"], version=1)
    assert open(os.path.join(sst2["path"], "saved_model.pb"), "rb").read() == before
    with pytest.raises(ValueError, match="non-negative integer"):
        with versions.new_version(export_dir, version="-1"):
            pass


def test_command_line_writes_the_next_version(mnli, tmp_path):
    export_dir = str(tmp_path / "serving")
    os.makedirs(os.path.join(export_dir, "7"))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_bert.export",
            f"--model_dir={mnli['model_dir']}",
            f"--export_dir={export_dir}",
            "--seq_length=16",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == os.path.join(export_dir, "8")
    with open(os.path.join(export_dir, "8", "assets.extra", "task.json")) as f:
        assert json.load(f)["seq_length"] == 16
    out = tf.saved_model.load(os.path.join(export_dir, "8")).signatures["serving_default"](
        text=tf.constant(TEXTS), text_b=tf.constant(TEXTS_B)
    )
    want = softmax(keras_logits(mnli["model_dir"], TEXTS, TEXTS_B, seq_length=16))
    np.testing.assert_allclose(out["probabilities"], want, atol=ATOL)


@keras.saving.register_keras_serializable(package="tests_export")
class PythonLayer(keras.layers.Layer):
    """Calls back into Python: a layer TF Serving could not run."""

    def call(self, x):
        y = tf.py_function(lambda t: t * 2.0, [x], tf.float32)
        return tf.ensure_shape(y, x.shape)


def test_op_check_rejects_python_ops_and_leaves_no_version(tmp_path):
    encoder = keras_bert.BertEncoder(keras_bert.BertConfig(**TINY))
    inputs = encoder_inputs()
    hidden = PythonLayer(name="python_layer")(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, {"logits": keras.layers.Dense(2)(hidden)})
    source = load_source(write_task_model(tmp_path / "run", "sst2", lower_case=False))
    source.model = model
    export_dir = str(tmp_path / "serving")
    with pytest.raises(OpCheckError, match=r"op EagerPyFunc runs Python code.*python_layer"):
        write_saved_model(source, export_dir)
    assert os.listdir(export_dir) == []  # Neither a version nor a temporary directory.


def test_op_check_rejects_text_ops_newer_than_tf_serving(tmp_path):
    import tensorflow_text as text

    module = tf.Module()
    module.trim = tf.function(
        lambda x: text.RoundRobinTrimmer(4).trim([x, x])[0],
        input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)],
    )
    tf.saved_model.save(module, str(tmp_path))
    assert list_ops(str(tmp_path))["TFText>RoundRobinTrim"].library == "tensorflow-text"
    with pytest.raises(
        OpCheckError, match=r"TFText>RoundRobinTrim is newer than the tensorflow-text 2\.12\.1"
    ):
        ops.check_ops(str(tmp_path))


def test_op_inventory(sst2):
    every = list_ops(sst2["path"])
    assert {o.library for o in every.values()} == {"tensorflow", "tensorflow-text"}
    text_ops = {name for name, o in every.items() if o.library == "tensorflow-text"}
    # The tokenizer's ops (the Σ-context ones for uncased models); all in tensorflow-text 2.12.1.
    assert text_ops == {
        "FastBertNormalize",
        "FastWordpieceTokenizeWithOffsets",
        "TFText>ByteSplitWithOffsets",
        "TFText>ByteSplitByOffsets",
        "TFText>NgramsStringJoin",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
    }
    assert not text_ops & ops.NEWER_TEXT_OPS
    assert all(o.nodes for o in every.values())
    assert text_ops <= set(list_ops(sst2["path"], "serving_default"))
    assert text_ops <= set(list_ops(sst2["path"], "preprocess"))
    predict = list_ops(sst2["path"], "predict_ids")
    assert {o.library for o in predict.values()} == {"tensorflow"} and "BatchMatMulV2" in predict
    with pytest.raises(KeyError, match="no signature 'nope'"):
        list_ops(sst2["path"], "nope")


def _json_text(text):
    return {"b64": base64.b64encode(text).decode()} if isinstance(text, bytes) else text


def test_fresh_process_answers_rest_bodies(sst2, mnli, tmp_path):
    texts = [_json_text(t) for t in TEXTS]
    want = softmax(keras_logits(sst2["model_dir"], TEXTS))
    responses = serve_fresh(
        sst2["path"],
        [
            {"instances": [{"text": t} for t in texts]},
            {"instances": texts},
            {"signature_name": "serving_default", "inputs": {"text": texts}},
            {"inputs": texts[:3]},
            {"signature_name": "preprocess", "instances": texts[:2]},
            {"instances": [{"txt": "a"}]},
        ],
        tmp_path,
    )
    for rows in responses[:2]:
        rows = rows["predictions"]
        np.testing.assert_allclose([r["probabilities"] for r in rows], want, atol=ATOL)
        assert [r["label"] for r in rows] == [["0", "1"][i] for i in want.argmax(-1)]
        assert [r["label_id"] for r in rows] == want.argmax(-1).tolist()
    columns = responses[2]["outputs"]
    np.testing.assert_allclose(columns["probabilities"], want, atol=ATOL)
    assert columns["label"] == [["0", "1"][i] for i in want.argmax(-1)]
    np.testing.assert_allclose(responses[3]["outputs"]["probabilities"], want[:3], atol=ATOL)
    ids = responses[4]["predictions"]
    expected = BertPreprocessor(load_source(sst2["model_dir"]).tokenizer, SEQ_LENGTH)(
        tf.constant(TEXTS[:2])
    )
    width = len(ids[0]["input_word_ids"])
    assert [r["input_word_ids"] for r in ids] == expected["input_word_ids"][
        :, :width
    ].numpy().tolist()
    assert "error" in responses[5] and "Unknown inputs ['txt']" in responses[5]["error"]

    pairs = [{"text": _json_text(a), "text_b": _json_text(b)} for a, b in zip(TEXTS, TEXTS_B)]
    want = softmax(keras_logits(mnli["model_dir"], TEXTS, TEXTS_B))
    rows, columns = serve_fresh(
        mnli["path"],
        [
            {"instances": pairs},
            {
                "inputs": {
                    "text": [p["text"] for p in pairs],
                    "text_b": [p["text_b"] for p in pairs],
                }
            },
        ],
        tmp_path,
    )
    np.testing.assert_allclose([r["probabilities"] for r in rows["predictions"]], want, atol=ATOL)
    np.testing.assert_allclose(columns["outputs"]["probabilities"], want, atol=ATOL)
    assert columns["outputs"]["label_id"] == want.argmax(-1).tolist()


def _cli_signatures(path):
    """{signature: {"inputs": {name: dtype}, "outputs": {name: dtype}}} from `saved_model_cli show
    --all`."""
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    run = subprocess.run([cli, "show", "--dir", path, "--all"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    signatures, current, section, name = {}, None, None, None
    for line in run.stdout.splitlines():
        line = line.strip()
        if line.startswith("signature_def['"):
            current = signatures.setdefault(line.split("'")[1], {"inputs": {}, "outputs": {}})
        elif current is not None and line.startswith(
            "The given SavedModel SignatureDef contains the following"
        ):
            section = "inputs" if "input" in line else "outputs"
        elif current is not None and line.startswith(("inputs['", "outputs['")):
            name = line.split("'")[1]
        elif current is not None and line.startswith("dtype:") and name:
            current[section][name] = line.split(":")[1].strip()
            name = None
    return signatures


def test_saved_model_cli_lists_the_documented_signatures(mnli):
    signatures = _cli_signatures(mnli["path"])
    assert sorted(k for k in signatures if not k.startswith("__")) == [
        "predict_ids",
        "preprocess",
        "serving_default",
    ]
    texts = {"text": "DT_STRING", "text_b": "DT_STRING"}
    ids = {"input_word_ids": "DT_INT32", "input_mask": "DT_INT32", "input_type_ids": "DT_INT32"}
    assert signatures["serving_default"] == {
        "inputs": texts,
        "outputs": {"label": "DT_STRING", "label_id": "DT_INT32", "probabilities": "DT_FLOAT"},
    }
    assert signatures["preprocess"] == {"inputs": texts, "outputs": ids}
    assert signatures["predict_ids"] == {"inputs": ids, "outputs": {"logits": "DT_FLOAT"}}


def test_pretrained_encoder_exports_as_a_feature_extractor(pretrained):
    loaded = tf.saved_model.load(pretrained["saved_model"])
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    assert sorted(out) == ["input_mask", "pooled_output", "sequence_output"]
    source = load_source(pretrained["checkpoint"])
    inputs = BertPreprocessor(source.tokenizer, source.seq_length)(tf.constant(TEXTS))
    want = pretrained["pretrainer"].encoder(inputs)
    width = out["input_mask"].shape[1]
    np.testing.assert_array_equal(out["input_mask"], inputs["input_mask"][:, :width])
    assert width == int(tf.reduce_max(tf.reduce_sum(inputs["input_mask"], 1)))
    np.testing.assert_allclose(out["pooled_output"], want["pooled_output"], atol=ATOL)
    mask = out["input_mask"].numpy()[..., None]
    np.testing.assert_allclose(
        out["sequence_output"] * mask, want["sequence_output"][:, :width] * mask, atol=ATOL
    )
    assert (source.kind, source.seq_length, source.pretrainer is not None) == (
        "encoder",
        TINY["max_position_embeddings"],
        True,
    )


def test_bad_sources_are_named(tmp_path, sst2):
    with pytest.raises(FileNotFoundError, match="No checkpoint at"):
        load_source(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match=r"seq_length must be an int in \[2, 64\]"):
        load_source(sst2["model_dir"], seq_length=65)
    source = load_source(sst2["model_dir"])
    source.kind = "ranking"
    with pytest.raises(ValueError, match="No serving signatures for 'ranking'"):
        write_saved_model(source, str(tmp_path / "serving"))
    assert not os.path.exists(tmp_path / "serving") or os.listdir(tmp_path / "serving") == []
