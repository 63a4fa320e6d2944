"""Presets offline: the table, a Google archive downloaded once into the Keras cache (a file://
URL standing in for storage.googleapis.com) with its sha256 checked, the Hugging Face cache laid
out as huggingface_hub lays it, and the errors: wrong sha256, hf:// not cached while offline, an
unknown name. Each error leaves nothing behind."""

import hashlib
import os
import shutil
import zipfile

import numpy as np
import pytest
import reference

from keras_bert import checkpoints, presets
from keras_bert.config import BertConfig
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.models.task_models import BertClassifier
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_tasks")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "##s", "."]


def test_table_lists_the_google_releases():
    assert len(PRESET_NAMES := sorted(presets.PRESETS)) == 9 + 24 + 4
    assert {"bert_base_uncased", "bert_large_wwm_cased", "bert_base_chinese"} <= set(PRESET_NAMES)
    base = presets.PRESETS["bert_base_uncased"]
    assert base.url.endswith("2018_10_18/uncased_L-12_H-768_A-12.zip") and base.lower_case
    assert not presets.PRESETS["bert_base_multi_cased"].lower_case
    assert presets.PRESETS["bert_mini_uncased"] == presets.PRESETS["bert_L-4_H-256_uncased"]
    # The computed parameter count equals the built encoder's.
    tiny = presets.PRESETS["bert_L-2_H-128_uncased"]
    encoder = BertEncoder(BertConfig.preset("L-2_H-128", vocab_size=tiny.vocab_size))
    assert tiny.parameters == encoder.count_params()
    assert "bert_L-12_H-768_uncased" in presets.describe()


@pytest.fixture
def google_archive(tmp_path, monkeypatch):
    """A tiny Google checkpoint zipped as the releases are (one top directory), and a table
    entry for it; the Keras cache in tmp_path."""
    encoder = BertEncoder(BertConfig.preset("tiny", vocab_size=len(VOCAB)))
    reference.randomize_weights(encoder, seed=1)
    source = tmp_path / "src" / "uncased_L-2_H-128_A-2"
    checkpoints.save(encoder, source, format="google", vocab=VOCAB)
    archive = tmp_path / "uncased_L-2_H-128_A-2.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in os.listdir(source):
            z.write(source / name, f"uncased_L-2_H-128_A-2/{name}")
    entry = presets.Preset(
        f"file://{archive}", presets._sha256(archive), 2, 128, 2, True, len(VOCAB), "test"
    )
    monkeypatch.setitem(presets.PRESETS, "test_tiny", entry)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    return encoder, archive


def test_google_preset_downloads_once(google_archive):
    encoder, archive = google_archive
    loaded = BertEncoder.from_preset("test_tiny")
    for a, b in zip(encoder.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    os.remove(archive)  # Read from the cache from now on.
    tokenizer = BertTokenizer.from_preset("test_tiny")
    assert tokenizer.vocabulary == VOCAB and tokenizer.lower_case
    preprocessor = BertPreprocessor.from_preset("test_tiny", seq_length=8)
    assert preprocessor.seq_length == 8
    model = BertClassifier.from_preset("test_tiny", num_classes=3)
    assert model.task_facts["labels"] == ["0", "1", "2"]
    np.testing.assert_array_equal(model.encoder.weights[0].numpy(), encoder.weights[0].numpy())
    with pytest.raises(Exception, match="pre-training heads|cls"):
        BertPretrainer.from_preset("test_tiny")  # The Google file has no cls/ heads.


def test_wrong_sha256_is_refused_and_nothing_kept(google_archive, monkeypatch):
    entry = presets.PRESETS["test_tiny"]
    monkeypatch.setitem(
        presets.PRESETS, "test_tiny", presets.Preset(**{**entry.__dict__, "sha256": "0" * 64})
    )
    with pytest.raises(ValueError, match="sha256 .* expected 0000.*refused"):
        BertEncoder.from_preset("test_tiny")
    assert os.listdir(presets.cache_root()) == []


def test_recorded_file_sha256_checked_after_unpacking(google_archive, monkeypatch, caplog):
    """An entry with its files' sha256 on record (as seven Google releases have) and no archive
    sha256: files that match are kept without the no-sha256 warning; one that differs is refused
    and nothing is kept."""
    assert presets.PRESETS["bert_base_uncased"].files_sha256["vocab.txt"].startswith("07eced37")
    entry = presets.PRESETS["test_tiny"]
    with zipfile.ZipFile(google_archive[1]) as z:
        sums = {
            os.path.basename(n): hashlib.sha256(z.read(n)).hexdigest()
            for n in z.namelist()
            if n.endswith(("vocab.txt", "bert_config.json"))
        }
    good = presets.Preset(**{**entry.__dict__, "sha256": None, "files_sha256": sums})
    bad = presets.Preset(**{**good.__dict__, "files_sha256": {**sums, "vocab.txt": "0" * 64}})
    monkeypatch.setitem(presets.PRESETS, "test_tiny", bad)
    with pytest.raises(ValueError, match="vocab.txt in the archive .* expected 0000.*refused"):
        BertEncoder.from_preset("test_tiny")
    assert os.listdir(presets.cache_root()) == []
    monkeypatch.setitem(presets.PRESETS, "test_tiny", good)
    with caplog.at_level("INFO", logger="absl"):  # absl flags may have raised its level.
        BertTokenizer.from_preset("test_tiny")
    assert "match their recorded sha256" in caplog.text and "no published" not in caplog.text


def _hf_cache(root, repo_id, directory):
    """huggingface_hub's cache layout: refs/main names the snapshot holding the files."""
    folder = root / ("models--" + repo_id.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0123abcd")
    shutil.copytree(directory, folder / "snapshots" / "0123abcd")


def test_hf_cache_and_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _hf_cache(tmp_path / "hub", "org/tiny-nli", os.path.join(FIXTURES, "pairs"))
    model = BertClassifier.from_preset("hf://org/tiny-nli")
    assert model.task_facts["labels"] == ["contradiction", "entailment", "neutral"]
    before = sorted(os.listdir(tmp_path / "hub"))
    with pytest.raises(FileNotFoundError, match="not in the Hugging Face cache .* HF_HUB_OFFLINE"):
        BertClassifier.from_preset("hf://org/not-here", num_classes=2)
    assert sorted(os.listdir(tmp_path / "hub")) == before


def test_unknown_name():
    with pytest.raises(FileNotFoundError, match="Unknown preset 'bert_huge'"):
        BertEncoder.from_preset("bert_huge")
