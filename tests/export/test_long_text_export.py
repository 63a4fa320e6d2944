"""Pair tasks trained on windows (`--long_text=windows`): the exported serving_default windows the
second text beside the first in-graph and gives the runner's pooled answers (STS-B scores, MNLI
labels), for a batch mixing short and long pairs: models trained on whole documents (pooling in
the model: mean, max, logsumexp, attention) and on single windows (pooling after it)."""

import os

import numpy as np
import pytest
import tensorflow as tf
from export_cases import TEXTS, TEXTS_B, write_task_model

from keras_bert.export import tflite
from keras_bert.export.signatures import build_signatures
from keras_bert.export.source import load_source
from keras_bert.tasks import finetuning, registry
from keras_bert.tasks.glue.data import InputExample

CASES = [
    ("stsb", "document", "attention"),
    ("mnli", "document", "attention"),
    ("mnli", "document", "max"),
    ("stsb", "document", "mean"),
    ("stsb", "document", "logsumexp"),
    ("mnli", "window", "max"),
]


@pytest.mark.parametrize("task_name, training, pooling", CASES)
def test_pair_windows_give_the_runner_answers(tmp_path, task_name, training, pooling):
    options = {
        "long_text": "windows",
        "max_windows": 5,
        "window_pooling": pooling,
        "window_training": training,
    }
    model_dir = write_task_model(tmp_path, task_name, seed=3, lower_case=False, **options)
    source = load_source(model_dir)
    task = registry.get_task(task_name, options)
    text_b = [b + " the story was good" * (i % 4) * 6 for i, b in enumerate(TEXTS_B)]
    text_a = [a if isinstance(a, str) else a.decode("utf-8", "replace") for a in TEXTS]
    examples = [
        InputExample(f"dev-{i}", a, b, None) for i, (a, b) in enumerate(zip(text_a, text_b))
    ]
    feats = task.encode(examples, source.tokenizer, source.seq_length)
    assert feats.num_features > len(examples)  # Long second texts: several windows.
    want = task.predictions(examples, feats, finetuning.predict(source.model, task, feats, 8))
    out = build_signatures(source)["serving_default"](tf.constant(text_a), tf.constant(text_b))
    counts = np.bincount(feats.example_index)
    assert out["num_windows"].numpy().tolist() == np.minimum(counts, 5).tolist()
    assert out["text_cut"].numpy().any() and not out["text_cut"].numpy().all()
    if task_name == "stsb":
        np.testing.assert_allclose(out["score"].numpy(), want, atol=1e-5)
    else:
        assert [x.decode() for x in out["label"].numpy()] == want
        assert np.all(np.abs(out["probabilities"].numpy().sum(-1) - 1) < 1e-5)


@pytest.mark.parametrize("pooling", ["attention", "logsumexp"])
def test_tflite_pools_in_the_model_as_the_runner(tmp_path, pooling):
    options = {
        "long_text": "windows",
        "max_windows": 4,
        "window_pooling": pooling,
        "window_training": "document",
    }
    model_dir = write_task_model(tmp_path, "sst2", seed=5, **options)
    source = load_source(model_dir)
    task = registry.get_task("sst2", options)
    texts = [a + " the story was good" * (i % 5) * 5 for i, a in enumerate(TEXTS_B)]
    examples = [InputExample(f"dev-{i}", t, None, None) for i, t in enumerate(texts)]
    feats = task.encode(examples, source.tokenizer, source.seq_length)
    logits = finetuning.predict(source.model, task, feats, 8)["logits"]  # (N, C): documents'
    want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    path = tflite.write_tflite(source, str(tmp_path / "tflite"))
    lite = tflite.load_interpreter(os.path.join(path, tflite.MODEL_FILE))
    out = lite.get_signature_runner("serving_default")(
        text=np.array([t.encode() for t in texts], object)
    )
    assert np.mean(out["label_id"] == logits.argmax(-1)) >= 0.995
    np.testing.assert_allclose(out["probabilities"], want, atol=1e-4)
    assert out["num_windows"].tolist() == np.minimum(np.bincount(feats.example_index), 4).tolist()
