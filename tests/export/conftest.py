"""Exports shared by the tests of this folder (each takes seconds to write, so once per session)."""

import keras
import pytest

import keras_bert
import reference
from export_cases import write_task_model
from finetune_cases import TINY, VOCAB
from keras_bert import checkpoints
from keras_bert.export import export_hub, export_saved_model


def _export(tmp_path_factory, task, lower_case=True):
    root = tmp_path_factory.mktemp(task)
    model_dir = write_task_model(root / "run", task, seed=len(task), lower_case=lower_case)
    return {"model_dir": model_dir, "export_dir": str(root / "serving"),
            "path": export_saved_model(model_dir, str(root / "serving"))}


@pytest.fixture(scope="session")
def sst2(tmp_path_factory):
    """Single-sentence binary classification (labels "0", "1")."""
    return _export(tmp_path_factory, "sst2")


@pytest.fixture(scope="session")
def mnli(tmp_path_factory):
    """Sentence-pair classification, three labels (cased: a smaller tokenizer graph, faster tests)."""
    return _export(tmp_path_factory, "mnli", lower_case=False)


@pytest.fixture(scope="session")
def stsb(tmp_path_factory):
    """Sentence-pair regression (cased)."""
    return _export(tmp_path_factory, "stsb", lower_case=False)


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory):
    """A cased Google checkpoint with its pre-training heads (cls/), exported as a SavedModel and a hub pair."""
    root = tmp_path_factory.mktemp("pretrained")
    keras.utils.set_random_seed(7)
    pretrainer = keras_bert.BertPretrainer(keras_bert.BertEncoder(keras_bert.BertConfig(**TINY)))
    reference.randomize_weights(pretrainer, seed=7, scale=0.2)
    checkpoint = str(root / "cased_L-1_H-32_A-2")
    checkpoints.save(pretrainer, checkpoint, format="google", vocab=VOCAB)
    return {"checkpoint": checkpoint, "pretrainer": pretrainer,
            "saved_model": export_saved_model(checkpoint, str(root / "serving")),
            "hub": export_hub(checkpoint, str(root / "hub"))}
