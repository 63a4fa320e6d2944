"""load_vocabulary: vocab.txt files, model directories of each layout, lists, bad input."""

import os

import keras_hub
import pytest
from official.nlp.tools import tokenization

from keras_bert.text import load_vocabulary

VOCAB = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s", "café", "中", "!"]


def _write(path, text, encoding="utf-8"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding=encoding, newline="") as f:
        f.write(text)
    return path


def test_file_matches_the_original_loader(tmp_path):
    path = _write(str(tmp_path / "vocab.txt"), "\n".join(VOCAB) + "\n")
    assert load_vocabulary(path) == VOCAB
    assert load_vocabulary(path) == list(tokenization.load_vocab(path))
    assert load_vocabulary(tmp_path / "vocab.txt") == VOCAB  # PathLike


def test_file_variants(tmp_path):
    crlf = _write(str(tmp_path / "crlf.txt"), "\r\n".join(VOCAB) + "\r\n")
    bom = _write(str(tmp_path / "bom.txt"), "\n".join(VOCAB), encoding="utf-8-sig")
    assert load_vocabulary(crlf) == VOCAB
    assert load_vocabulary(bom) == VOCAB


@pytest.mark.parametrize(
    "relative", ["vocab.txt", "assets/vocab.txt", "assets/tokenizer/vocabulary.txt"]
)
def test_model_directories(tmp_path, relative):
    """Hugging Face / original checkpoint dir, TF Hub SavedModel, keras-hub preset."""
    _write(str(tmp_path / relative), "\n".join(VOCAB) + "\n")
    assert load_vocabulary(str(tmp_path)) == VOCAB


def test_keras_hub_preset_assets(tmp_path):
    tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=VOCAB)
    assets = tmp_path / "assets" / "tokenizer"
    assets.mkdir(parents=True)
    tokenizer.save_assets(str(assets))
    assert load_vocabulary(str(tmp_path)) == tokenizer.get_vocabulary()


def test_list_source():
    assert load_vocabulary(tuple(VOCAB)) == VOCAB


def test_missing_file_and_directory(tmp_path):
    missing = str(tmp_path / "nope" / "vocab.txt")
    with pytest.raises(FileNotFoundError, match="nope"):
        load_vocabulary(missing)
    with pytest.raises(FileNotFoundError, match="No vocabulary in directory"):
        load_vocabulary(str(tmp_path))


def test_missing_special_tokens_are_named(tmp_path):
    path = _write(str(tmp_path / "vocab.txt"), "\n".join(["[PAD]", "[UNK]", "the"]))
    with pytest.raises(ValueError, match=r"\['\[CLS\]', '\[SEP\]', '\[MASK\]'\]"):
        load_vocabulary(path)
    with pytest.raises(ValueError, match="MASK"):
        load_vocabulary([t for t in VOCAB if t != "[MASK]"])


def test_duplicates_and_empty_tokens(tmp_path):
    path = _write(str(tmp_path / "vocab.txt"), "\n".join(VOCAB + ["the"]))
    with pytest.raises(ValueError, match="duplicate token 'the' at lines 7 and 12"):
        load_vocabulary(path)
    with pytest.raises(ValueError, match="empty"):
        load_vocabulary(VOCAB[:3] + [""] + VOCAB[3:])
    with pytest.raises(ValueError, match="empty"):
        load_vocabulary([])


def test_not_utf8(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("\n".join(VOCAB).encode() + b"\n\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8"):
        load_vocabulary(str(path))
