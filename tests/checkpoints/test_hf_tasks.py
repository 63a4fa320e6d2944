"""Fine-tuned Hugging Face task models in and out, against transformers' own answers.

The directories under hf_tasks/ were written by transformers 5 (make_hf_task_fixtures.py: tiny
seeded models, tokenizer.json without vocab.txt) with what transformers answered on a few texts
(expected.json); the tests that call transformers directly skip where it is absent.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from hf_task_cases import FIXTURES, SEQ_LENGTH
from hf_task_cases import expected as _expected
from hf_task_cases import ids as _ids

from keras_bert.checkpoints import hf_tasks
from keras_bert.models.task_models import (
    BertClassifier,
    BertMultipleChoice,
    BertSpanLabeler,
    BertTokenClassifier,
)

CLASSES = {
    "pairs": BertClassifier,
    "regression": BertClassifier,
    "tokens": BertTokenClassifier,
    "qa": BertSpanLabeler,
    "choice": BertMultipleChoice,
    "stsb": BertClassifier,
}
PAIR_CASES = ("pairs", "qa", "stsb")


def _texts(name, expected):
    if name in PAIR_CASES:
        return (expected["texts"], expected["pairs"])
    return expected["texts"]


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_from_preset_matches_transformers(name):
    """Logits on transformers' ids equal its logits; our preprocessor gives its ids; labels and
    casing (tokenizer.json's normalizer) come along."""
    expected = _expected(name)
    model = CLASSES[name].from_preset(os.path.join(FIXTURES, name), seq_length=SEQ_LENGTH)
    outputs = model.predict(_ids(expected), verbose=0)
    for key in ("logits", "start_logits", "end_logits"):
        if key in expected:
            np.testing.assert_allclose(outputs[key], expected[key], atol=1e-4)
    if name != "choice":
        texts = _texts(name, expected)
        texts = tuple(map(tf.constant, texts)) if isinstance(texts, tuple) else tf.constant(texts)
        ids = model.preprocessor(texts)
        np.testing.assert_array_equal(ids["input_word_ids"], expected["input_ids"])
        np.testing.assert_array_equal(ids["input_type_ids"], expected["token_type_ids"])
    assert model.preprocessor.tokenizer.lower_case is (name != "pairs")
    facts = model.task_facts
    assert (
        facts["problem"]
        == {
            "pairs": "classification",
            "regression": "regression",
            "tokens": "token_classification",
            "qa": "span",
            "choice": "multiple_choice",
            "stsb": "regression",
        }[name]
    )
    if name == "pairs":
        assert facts["labels"] == ["contradiction", "entailment", "neutral"]
    if name in ("pairs", "regression", "stsb"):  # Only "stsb" says (finetuning_task).
        assert facts["text_inputs"] == (["text", "text_b"] if name == "stsb" else ["text"])
    if name == "tokens":
        assert facts["labels"] == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.mark.slow
def test_multiple_choice_raw_text_matches_transformers():
    expected = _expected("choice")
    model = BertMultipleChoice.from_preset(os.path.join(FIXTURES, "choice"), seq_length=SEQ_LENGTH)
    endings = [expected["pairs"]] * len(expected["texts"])
    logits = model.predict((expected["texts"], endings), verbose=0)  # (B, K)
    np.testing.assert_allclose(logits, expected["logits"], atol=1e-4)


def test_text_pair_from_config_argument_or_a_notice(caplog):
    """Pairs where config.json's finetuning_task says so (run_glue writes it) or text_pair=True;
    a directory that does not say reads single texts with a notice naming --text_pair; a
    text_pair that disagrees with config.json or the task is refused."""
    stsb, pairs = os.path.join(FIXTURES, "stsb"), os.path.join(FIXTURES, "pairs")
    assert hf_tasks.read_facts(stsb).text_pair is True
    assert hf_tasks.read_facts(pairs).text_pair is None
    with caplog.at_level("WARNING"):
        said = BertClassifier.from_preset(stsb)
        assert not caplog.records
        silent = BertClassifier.from_preset(pairs)
    assert "--text_pair" in caplog.text and "single texts or sentence pairs" in caplog.text
    assert said.task_facts["text_inputs"] == ["text", "text_b"] and said.task_facts["text_pair"]
    assert silent.task_facts["text_inputs"] == ["text"] and "text_pair" not in silent.task_facts
    told = BertClassifier.from_preset(pairs, text_pair=True)
    assert told.task_facts["text_inputs"] == ["text", "text_b"]
    with pytest.raises(ValueError, match="text_pair=False disagrees .* finetuning_task='stsb'"):
        BertClassifier.from_preset(stsb, text_pair=False)
    with pytest.raises(ValueError, match="reads one text .*text_pair=True does not apply"):
        BertTokenClassifier.from_preset(os.path.join(FIXTURES, "tokens"), text_pair=True)
    with pytest.raises(ValueError, match="always reads question and context"):
        BertSpanLabeler.from_preset(os.path.join(FIXTURES, "qa"), text_pair=False)


def test_wrong_class_architecture_and_num_classes_are_refused(tmp_path):
    pairs = os.path.join(FIXTURES, "pairs")
    with pytest.raises(ValueError, match="num_classes=2 disagrees .* 3 classes"):
        BertClassifier.from_preset(pairs, num_classes=2)
    with pytest.raises(
        ValueError, match="BertForSequenceClassification: load it with BertClassifier"
    ):
        BertTokenClassifier.from_preset(pairs, num_classes=3)
    roberta = tmp_path / "roberta"
    shutil.copytree(pairs, roberta)
    config = json.loads((roberta / "config.json").read_text())
    config["architectures"] = ["RobertaForSequenceClassification"]
    (roberta / "config.json").write_text(json.dumps(config))
    before = sorted(os.listdir(roberta))
    with pytest.raises(ValueError, match="'RobertaForSequenceClassification' is not supported"):
        BertClassifier.from_preset(str(roberta), num_classes=3)
    assert sorted(os.listdir(roberta)) == before


def test_saved_as_huggingface_and_read_back(tmp_path):
    """Ours written as a Hugging Face directory reads back with the same logits and labels."""
    model = BertClassifier.from_preset(
        os.path.join(FIXTURES, "pairs"), seq_length=SEQ_LENGTH, text_pair=True
    )
    from keras_bert import checkpoints

    checkpoints.save(model, tmp_path / "hf", format="huggingface")
    again = BertClassifier.from_preset(str(tmp_path / "hf"), seq_length=SEQ_LENGTH)
    ids = _ids(_expected("pairs"))
    np.testing.assert_allclose(
        again.predict(ids, verbose=0)["logits"], model.predict(ids, verbose=0)["logits"], atol=1e-6
    )
    assert again.task_facts["labels"] == model.task_facts["labels"]
    assert again.preprocessor.tokenizer.vocabulary == model.preprocessor.tokenizer.vocabulary
    assert hf_tasks.read_facts(tmp_path / "hf").lower_case is False
    assert hf_tasks.read_facts(tmp_path / "hf").text_pair is True  # keras_bert_text_pair.
    assert again.task_facts["text_inputs"] == ["text", "text_b"]


@pytest.mark.slow
def test_transformers_loads_ours(tmp_path):
    """transformers' AutoModelForSequenceClassification reads our fine-tuned classifier with its
    labels and the same logits; AutoTokenizer gives our preprocessor's ids."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from keras_bert import checkpoints

    model = BertClassifier.from_preset(
        os.path.join(FIXTURES, "regression"), seq_length=SEQ_LENGTH
    )  # A head to replace: a new 2-class one on its encoder, labels of our own.
    model = BertClassifier(model.encoder, num_classes=2, preprocessor=model.preprocessor)
    model.task_facts = model.default_facts(labels=["negative", "positive"])
    checkpoints.save(model, tmp_path / "hf", format="huggingface")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert theirs.config.id2label == {0: "negative", 1: "positive"}
    texts = _expected("regression")["texts"]
    encoded = tokenizer(texts, padding="max_length", max_length=SEQ_LENGTH, return_tensors="pt")
    ours = model.preprocessor(tf.constant(texts))
    np.testing.assert_array_equal(ours["input_word_ids"], encoded["input_ids"].numpy())
    with torch.no_grad():
        logits = theirs(**encoded).logits.numpy()
    np.testing.assert_allclose(model.predict(texts, verbose=0), logits, atol=1e-4)
