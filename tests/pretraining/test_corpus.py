"""Corpus reading: the original sentence format, plain text, one document per line, tf.data/tfds."""

import pytest
import tensorflow as tf

from keras_bert.pretraining import corpus


def test_split_sentences_rules():
    text = (
        'Dr. Smith met J. R. Tolkien in the U.S. on Monday. It rained!  "Really?" she asked. '
        "Prices rose 3.5 percent, e.g. for bread... 2020 was odd. ok then."
    )
    assert corpus.split_sentences(text) == [
        "Dr. Smith met J. R. Tolkien in the U.S. on Monday.",
        "It rained!",
        '"Really?" she asked.',
        "Prices rose 3.5 percent, e.g. for bread...",
        "2020 was odd. ok then.",
    ]
    assert corpus.split_sentences("一句。二句！三") == ["一句。", "二句！", "三"]
    assert corpus.split_sentences("  \n ") == []


def test_sentence_format_documents(tmp_path):
    (tmp_path / "a.txt").write_text("First one.\nSecond one.\n\n\n  \nThird.\n")
    (tmp_path / "b.txt").write_text("Fourth.")
    docs = list(corpus.read_documents(str(tmp_path / "*.txt")))
    assert docs == [["First one.", "Second one."], ["Third."], ["Fourth."]]


def test_text_and_lines_formats(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("A wrapped\nparagraph. It has two sentences.\n\nNext paragraph here.\n")
    assert list(corpus.read_documents(str(path), file_format="text")) == [
        ["A wrapped paragraph.", "It has two sentences.", "Next paragraph here."]
    ]
    assert list(corpus.read_documents(str(path), file_format="text", max_document_sentences=2)) == [
        ["A wrapped paragraph.", "It has two sentences."],
        ["Next paragraph here."],
    ]
    assert list(corpus.read_documents(str(path), file_format="lines")) == [
        ["A wrapped"],
        ["paragraph.", "It has two sentences."],
        ["Next paragraph here."],
    ]


def test_streaming_reads_lazily(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("".join(f"Sentence {i}.\n\n" for i in range(100000)))
    docs = corpus.read_documents(str(path))
    assert next(docs) == ["Sentence 0."] and next(docs) == ["Sentence 1."]


def test_invalid_utf8_and_bad_arguments(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\nbad \xff byte\n")
    assert list(corpus.read_documents(str(path))) == [["good line", "bad \ufffd byte"]]
    with pytest.raises(ValueError, match="bad.txt:2: invalid UTF-8"):
        list(corpus.read_documents(str(path), errors="strict"))
    with pytest.raises(FileNotFoundError, match="missing"):
        list(corpus.read_documents(str(tmp_path / "missing*.txt")))
    with pytest.raises(ValueError, match="file_format"):
        list(corpus.read_documents(str(path), file_format="xml"))


def test_dataset_documents():
    ds = tf.data.Dataset.from_tensor_slices(
        {"text": ["One. Two here.\nThree.", "", "Four."], "id": [1, 2, 3]}
    )
    assert list(corpus.dataset_documents(ds)) == [["One.", "Two here.", "Three."], ["Four."]]
    assert list(corpus.dataset_documents([b"Aa bb. Cc dd.", "E."])) == [
        ["Aa bb.", "Cc dd."],
        ["E."],
    ]
    with pytest.raises(KeyError, match="body"):
        list(corpus.dataset_documents(ds, field="body"))


def test_tfds_documents_offline_with_mock_data():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=4):
        docs = list(corpus.tfds_documents("wikipedia/20230601.en", split="train"))
    assert len(docs) == 4 and all(isinstance(s, str) and s for d in docs for s in d)
