"""Pair tasks trained on windows (`--long_text=windows`): the exported serving_default windows the
second text beside the first in-graph and gives the runner's pooled answers (STS-B scores, MNLI
labels), for a batch mixing short and long pairs."""

import numpy as np
import pytest
import tensorflow as tf
from export_cases import TEXTS, TEXTS_B, write_task_model

from keras_bert.export.signatures import build_signatures
from keras_bert.export.source import load_source
from keras_bert.tasks import registry, runner
from keras_bert.tasks.glue.data import InputExample

OPTIONS = {"long_text": "windows", "max_windows": 5, "window_pooling": "max"}


@pytest.mark.parametrize("task_name", ["stsb", "mnli"])
def test_pair_windows_give_the_runner_answers(tmp_path, task_name):
    model_dir = write_task_model(tmp_path, task_name, seed=3, lower_case=False, **OPTIONS)
    source = load_source(model_dir)
    task = registry.get_task(task_name, OPTIONS)
    text_b = [b + " the story was good" * (i % 4) * 6 for i, b in enumerate(TEXTS_B)]
    text_a = [a if isinstance(a, str) else a.decode("utf-8", "replace") for a in TEXTS]
    examples = [
        InputExample(f"dev-{i}", a, b, None) for i, (a, b) in enumerate(zip(text_a, text_b))
    ]
    feats = task.encode(examples, source.tokenizer, source.seq_length)
    assert feats.num_features > len(examples)  # Long second texts: several windows.
    want = task.predictions(examples, feats, runner.predict(source.model, task, feats, 8))
    out = build_signatures(source)["serving_default"](tf.constant(text_a), tf.constant(text_b))
    counts = np.bincount(feats.example_index)
    assert out["num_windows"].numpy().tolist() == np.minimum(counts, 5).tolist()
    assert out["text_cut"].numpy().any() and not out["text_cut"].numpy().all()
    if task_name == "stsb":
        np.testing.assert_allclose(out["score"].numpy(), want, atol=1e-5)
    else:
        assert [x.decode() for x in out["label"].numpy()] == want
        assert np.all(np.abs(out["probabilities"].numpy().sum(-1) - 1) < 1e-5)
