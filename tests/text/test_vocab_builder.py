"""Vocabulary building: coverage checked with the original Python tokenizer, determinism, size,
CLI."""

import os
import random
import subprocess
import sys

import pytest
import tensorflow as tf
from official.nlp.tools import tokenization

from keras_bert.text.tokenizer import BertTokenizer
from keras_bert.text.vocab import write_vocabulary
from keras_bert.text.vocab_builder import build_vocabulary, pretokenize

SYLLABLES = ["ka", "to", "ri", "mu", "sé", "la", "pö", "ne", "qui", "ab", "zor", "ën", "ti", "ham"]
EXTRAS = ["你", "好", "世", "界", "½", "ﬁ", "Ä", "…", "😀", "x²"]


def _corpus_lines(n=1500, seed=0):
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(600)]
    weights = [1.0 / (i + 1) for i in range(len(words))]  # Zipf-like
    lines = []
    for _ in range(n):
        toks = rng.choices(words, weights, k=rng.randint(3, 15))
        toks = [t.capitalize() if rng.random() < 0.2 else t for t in toks]
        if rng.random() < 0.3:
            toks.append(rng.choice(EXTRAS))
        lines.append(" ".join(toks) + rng.choice([".", "!", ",", "?", ""]))
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    lines = _corpus_lines()
    for i in range(3):
        (root / f"part-{i}.txt").write_text("\n".join(lines[i::3]) + "\n", encoding="utf-8")
    return root, lines


@pytest.fixture(scope="module")
def uncased_vocab(corpus):
    root, _ = corpus
    return build_vocabulary([str(root / "part-*.txt")], 400, lower_case=True)


def _seen_words(lines, lower_case):
    basic = tokenization.BasicTokenizer(do_lower_case=lower_case)
    return [w for line in lines for w in basic.tokenize(line)]


def _original_tokens(vocab, lines, lower_case, tmp_path):
    path = str(tmp_path / "vocab.txt")
    write_vocabulary(vocab, path)
    full = tokenization.FullTokenizer(path, do_lower_case=lower_case)
    return [t for line in lines for t in full.tokenize(line)]


def test_pretokenize_matches_original_basic_tokenizer():
    rng = random.Random(1)
    ranges = [
        (0, 0x250),
        (0x300, 0x370),
        (0x2000, 0x2070),
        (0x3000, 0x3010),
        (0x4E00, 0x4E10),
        (0xFF00, 0xFF20),
    ]
    pool = [chr(c) for a, b in ranges for c in range(a, b)]
    pool += [
        chr(c) for c in (0x1F600, 0xFFFD, 0x2028, 0x85, 0xAD, 0x200B, 0xFEFF, 0x130, 0xBD, 0xFB01)
    ]
    lines = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    lines += ["Héllo, Wörld! 你好 ½ ﬁne ＡＢＣ x²", "  ", ""]
    for lower_case in (True, False):
        basic = tokenization.BasicTokenizer(do_lower_case=lower_case)
        got = pretokenize(tf.constant(lines), lower_case).to_list()
        for line, words in zip(lines, got):
            assert [w.decode("utf-8") for w in words] == basic.tokenize(line), repr(line)


def test_pretokenize_drops_invalid_utf8():
    words = pretokenize(tf.constant([b"ab\xff\xfecd ef"]), True).to_list()
    assert words == [[b"abcd", b"ef"]]


def test_uncased_vocab_layout_and_coverage(corpus, uncased_vocab, tmp_path):
    _, lines = corpus
    vocab = uncased_vocab
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 0.95 * 400 <= len(vocab) <= 400 and len(set(vocab)) == len(vocab)  # the budget is used
    chars = {c for w in _seen_words(lines, True) for c in w}
    assert chars <= set(vocab)
    assert {"##" + c for c in chars} <= set(vocab)
    assert not any(c.isupper() for t in vocab for c in t if not t.startswith("["))
    assert "é" not in vocab and "e" in vocab  # accents stripped
    # The original Python tokenizer with this vocabulary: nothing unknown, words mostly whole.
    tokens = _original_tokens(vocab, lines, True, tmp_path)
    assert "[UNK]" not in tokens
    assert len(tokens) < 1.5 * len(_seen_words(lines, True))
    # The in-graph tokenizer normalizes as the vocabulary was built: same pieces, no [UNK].
    tokenizer = BertTokenizer(vocab, lower_case=True)
    assert tokenizer(tf.constant(lines)).flat_values.numpy().tolist() == [
        vocab.index(t) for t in tokens
    ]


def test_cased_vocab_keeps_case_and_accents(corpus, tmp_path):
    _, lines = corpus
    vocab = build_vocabulary(tf.data.Dataset.from_tensor_slices(lines), 400, lower_case=False)
    assert {"é", "Ä", "K"} <= set(vocab)
    assert "[UNK]" not in _original_tokens(vocab, lines, False, tmp_path)


def test_deterministic_and_files_equal_dataset(corpus, uncased_vocab):
    root, _ = corpus
    files = sorted(str(p) for p in root.glob("part-*.txt"))
    again = build_vocabulary(",".join(files), 400)
    assert again == uncased_vocab
    batched = tf.data.TextLineDataset(files).batch(7)
    assert build_vocabulary(batched, 400) == uncased_vocab


def test_size_is_never_exceeded_and_keeps_characters(corpus):
    _, lines = corpus
    chars = {c for w in _seen_words(lines, True) for c in w}
    minimum = 5 + 2 * len(chars)
    ds = tf.data.Dataset.from_tensor_slices(lines)
    vocab = build_vocabulary(ds, minimum + 3)
    assert len(vocab) <= minimum + 3
    assert chars | {"##" + c for c in chars} <= set(vocab)
    with pytest.raises(ValueError, match="too small"):
        build_vocabulary(ds, minimum - 1)


def test_custom_reserved_tokens_come_first(corpus):
    _, lines = corpus
    reserved = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
    vocab = build_vocabulary(
        tf.data.Dataset.from_tensor_slices(lines[:200]), 200, reserved_tokens=reserved
    )
    assert vocab[:6] == reserved


def test_bad_corpus_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="matches no file"):
        build_vocabulary([str(tmp_path / "missing*.txt")], 100)
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no words"):
        build_vocabulary([str(empty)], 100)
    with pytest.raises(TypeError, match="tf.string"):
        build_vocabulary(tf.data.Dataset.range(3), 100)
    with pytest.raises(ValueError, match="reserved"):
        build_vocabulary([str(empty)], 5)


def test_write_vocabulary_atomic_and_validated(tmp_path):
    path = tmp_path / "out" / "vocab.txt"
    write_vocabulary(["[PAD]", "a", "##a"], str(path))
    assert path.read_text(encoding="utf-8").splitlines() == ["[PAD]", "a", "##a"]
    assert os.listdir(path.parent) == ["vocab.txt"]
    with pytest.raises(ValueError, match="one line"):
        write_vocabulary(["a", "b\nc"], str(path))
    with pytest.raises(ValueError, match="duplicate"):
        write_vocabulary(["a", "a"], str(path))
    assert path.read_text(encoding="utf-8").splitlines() == ["[PAD]", "a", "##a"]


def test_command_line(corpus, uncased_vocab, tmp_path):
    root, _ = corpus
    out = tmp_path / "vocab.txt"
    cmd = [
        sys.executable,
        "-m",
        "keras_bert.text.build_vocab",
        f"--input={root}/part-*.txt",
        "--vocab_size=400",
        "--lower_case=true",
        f"--output={out}",
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    assert out.read_text(encoding="utf-8").splitlines() == uncased_vocab


def test_command_line_missing_input(tmp_path):
    from absl import flags
    from absl.testing import flagsaver

    from keras_bert.text import build_vocab

    build_vocab.define_flags()
    flags.FLAGS.mark_as_parsed()
    with flagsaver.flagsaver(
        input=[str(tmp_path / "nothing*.txt")], output=str(tmp_path / "v.txt")
    ):
        with pytest.raises(FileNotFoundError, match="matches no file"):
            build_vocab.main(["build_vocab"])
    assert not (tmp_path / "v.txt").exists()
