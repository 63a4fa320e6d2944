"""A classifier whose head reads the mean of its tokens (`pooling="mean"`, the default of
`--long_text=windows`) keeps it everywhere: `from_preset`, `.keras` and task model directories
read back, and the SavedModel and TFLite exports answer as the model (in memory) and as the runner
(windows); the Hugging Face form, whose head reads [CLS], refuses it."""

import os

import numpy as np
import pytest
import tensorflow as tf
from export_cases import TEXTS_B, write_task_model
from finetune_cases import sentiment_rows, write_checkpoint
from hf_task_cases import FIXTURES

from keras_bert import checkpoints, export
from keras_bert.export import tflite
from keras_bert.export.signatures import build_signatures
from keras_bert.export.source import load_source
from keras_bert.models.task_models import BertClassifier
from keras_bert.tasks import finetuning as runner
from keras_bert.tasks import registry
from keras_bert.tasks.glue.data import InputExample


def _logits(outputs):
    return np.asarray(outputs["logits"] if isinstance(outputs, dict) else outputs)


def _softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_mean_pooled_classifier_round_trips_and_exports_with_equal_answers(tmp_path):
    model = BertClassifier.from_preset(
        write_checkpoint(str(tmp_path / "ckpt")), num_classes=2, seq_length=32, pooling="mean"
    )
    head = model.get_layer("classifier")
    head.kernel.assign(np.random.default_rng(0).normal(0, 1.0, head.kernel.shape))
    texts = [text for text, _ in sentiment_rows(6, seed=1)]
    want = _logits(model.predict(texts, verbose=0))  # (N, 2)
    packed = model.preprocessor(tf.constant(texts))
    states = np.asarray(model.encoder(packed)["sequence_output"])  # (N, S, H)
    mask = np.asarray(packed["input_mask"])[..., None]
    means = (states * mask).sum(1) / mask.sum(1)  # The tokens' mean: [CLS] and [SEP] included.
    np.testing.assert_allclose(want, means @ head.kernel.numpy() + head.bias.numpy(), atol=1e-4)

    path = str(tmp_path / "m.keras")
    model.save(path)
    again = BertClassifier.from_preset(path)
    assert again.pooling == "mean"
    np.testing.assert_allclose(_logits(again.predict(texts, verbose=0)), want, atol=1e-5)
    with pytest.raises(ValueError, match="is fine-tuned: its head is fixed"):
        BertClassifier.from_preset(path, pooling="cls")

    served = tf.saved_model.load(export.export_saved_model(model, str(tmp_path / "saved")))
    answer = served.signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(answer["probabilities"].numpy(), _softmax(want), atol=1e-5)
    version = tflite.export_tflite(model, str(tmp_path / "tflite"))
    lite = tflite.load_interpreter(os.path.join(version, tflite.MODEL_FILE))
    out = lite.get_signature_runner("serving_default")(text=np.array(texts, object))
    np.testing.assert_allclose(out["probabilities"], _softmax(want), atol=1e-4)

    with pytest.raises(ValueError, match="has no Hugging Face form"):
        checkpoints.save(model, tmp_path / "hf", format="huggingface")
    with pytest.raises(ValueError, match="head reads \\[CLS\\] through the pooler"):
        BertClassifier.from_preset(os.path.join(FIXTURES, "pairs"), pooling="mean")


def test_windows_default_pools_tokens_and_serves_the_runner_answers(tmp_path):
    options = {"long_text": "windows", "max_windows": 4}
    model_dir = write_task_model(tmp_path, "sst2", seed=4, **options)
    source = load_source(model_dir)
    assert source.info["token_pooling"] == "mean" and source.model.pooling == "mean"
    task = registry.get_task("sst2", options)
    texts = [a + " the story was good" * (i % 5) * 5 for i, a in enumerate(TEXTS_B)]
    examples = [InputExample(f"dev-{i}", t, None, None) for i, t in enumerate(texts)]
    feats = task.encode(examples, source.tokenizer, source.seq_length)
    assert feats.num_features > len(examples)  # Several windows for the long texts.
    want = task.predictions(examples, feats, runner.predict(source.model, task, feats, 8))
    out = build_signatures(source)["serving_default"](tf.constant(texts))
    assert [x.decode() for x in out["label"].numpy()] == want
    assert len(set(want)) == 2  # Both labels occur: the check can fail.
