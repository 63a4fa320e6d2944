"""Exports shared by the tests of this folder (each takes seconds to write, so once per session)."""

import os

import keras
import pytest
import reference
from export_cases import write_task_model
from finetune_cases import TINY, VOCAB

import keras_bert
from keras_bert import checkpoints
from keras_bert.export import export_hub, export_saved_model


def _export(tmp_path_factory, task, lower_case=True, **options):
    root = tmp_path_factory.mktemp(task)
    model_dir = write_task_model(
        root / "run", task, seed=len(task), lower_case=lower_case, **options
    )
    return {
        "model_dir": model_dir,
        "export_dir": str(root / "serving"),
        "path": export_saved_model(model_dir, str(root / "serving")),
    }


@pytest.fixture(scope="session")
def sst2(tmp_path_factory):
    """Single-sentence binary classification (labels "0", "1")."""
    return _export(tmp_path_factory, "sst2")


@pytest.fixture(scope="session")
def mnli(tmp_path_factory):
    """Sentence-pair classification, three labels (cased: a smaller tokenizer graph, faster
    tests)."""
    return _export(tmp_path_factory, "mnli", lower_case=False)


@pytest.fixture(scope="session")
def stsb(tmp_path_factory):
    """Sentence-pair regression (cased)."""
    return _export(tmp_path_factory, "stsb", lower_case=False)


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory):
    """A cased Google checkpoint with its pre-training heads (cls/), exported as a SavedModel and a
    hub pair."""
    root = tmp_path_factory.mktemp("pretrained")
    keras.utils.set_random_seed(7)
    pretrainer = keras_bert.BertPretrainer(keras_bert.BertEncoder(keras_bert.BertConfig(**TINY)))
    reference.randomize_weights(pretrainer, seed=7, scale=0.2)
    checkpoint = str(root / "cased_L-1_H-32_A-2")
    checkpoints.save(pretrainer, checkpoint, format="google", vocab=VOCAB)
    return {
        "checkpoint": checkpoint,
        "pretrainer": pretrainer,
        "saved_model": export_saved_model(checkpoint, str(root / "serving")),
        "hub": export_hub(checkpoint, str(root / "hub")),
    }


# NER's vocabulary: two tokens of VOCAB become suffix pieces, so that words of several pieces occur.
NER_VOCAB = [{"quite": "##s", "an": "##ing"}.get(t, t) for t in VOCAB]


@pytest.fixture(scope="session")
def conll(tmp_path_factory):
    """NER (CoNLL-2003 tags), uncased, with NER_VOCAB ("movies" = movie ##s)."""
    root = tmp_path_factory.mktemp("conll2003")
    model_dir = write_task_model(root / "run", "conll2003", seed=3)
    with open(os.path.join(model_dir, "vocab.txt"), "w") as f:
        f.write("".join(t + "\n" for t in NER_VOCAB))
    return {
        "model_dir": model_dir,
        "export_dir": str(root / "serving"),
        "path": export_saved_model(model_dir, str(root / "serving")),
    }


@pytest.fixture(scope="session")
def swag(tmp_path_factory):
    """Multiple choice, 4 endings (cased)."""
    return _export(tmp_path_factory, "swag", lower_case=False)


# SQuAD with windows of 32 - 6 - 3 = 23 context tokens 8 apart: a 60-token context has 6 windows.
SQUAD_OPTIONS = dict(doc_stride=8, max_query_length=6, max_answer_length=5)


@pytest.fixture(scope="session")
def squad1(tmp_path_factory):
    """SQuAD v1.1 (uncased), small windows (SQUAD_OPTIONS)."""
    return _export(tmp_path_factory, "squad1", **SQUAD_OPTIONS)


@pytest.fixture(scope="session")
def squad2(tmp_path_factory):
    """SQuAD v2.0 (cased), small windows, a null threshold that some questions pass."""
    return _export(
        tmp_path_factory,
        "squad2",
        lower_case=False,
        null_score_diff_threshold=-1.9,
        **SQUAD_OPTIONS,
    )
