"""WordPiece vocabularies: loaded from vocab.txt files, model directories, Python lists; written
as vocab.txt (the one writer of the package)."""

import collections
import os
import re

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Where a vocabulary sits inside a model directory, first match wins: Hugging Face and
# original checkpoints (vocab.txt), TF Hub SavedModels (assets/vocab.txt), keras-hub
# presets (assets/tokenizer/vocabulary.txt).
VOCAB_LOCATIONS = (
    "vocab.txt",
    os.path.join("assets", "vocab.txt"),
    os.path.join("assets", "tokenizer", "vocabulary.txt"),
    "vocabulary.txt",
)


def load_vocabulary(source):
    """Loads and checks a WordPiece vocabulary.

    Args:
        source: a list/tuple of str tokens (id = position), the path of a vocabulary
            file (UTF-8, one token per line, as the original and Hugging Face
            vocab.txt), or a directory holding one at a location of `VOCAB_LOCATIONS`.

    Returns:
        list[str]: the tokens; the id of a token is its index.

    Raises:
        FileNotFoundError: no such file, or no vocabulary in the directory.
        ValueError: empty or duplicate tokens, or a special token missing.
    """
    if isinstance(source, (list, tuple)):
        tokens = [str(t) for t in source]
        origin = "vocabulary list"
    else:
        path = os.fspath(source)
        if os.path.isdir(path):
            path = _find_in_directory(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Vocabulary file not found: {path}")
        tokens = _read_lines(path)
        origin = path
    check_vocabulary(tokens, origin)
    return tokens


def check_vocabulary(tokens, origin="vocabulary"):
    """Raises ValueError naming what is wrong with `tokens` (see `load_vocabulary`)."""
    if not tokens:
        raise ValueError(f"{origin}: the vocabulary is empty.")
    seen = {}
    for index, token in enumerate(tokens):
        if not token or token != token.strip():
            raise ValueError(
                f"{origin}: token {index} ({token!r}) is empty or has surrounding whitespace."
            )
        if token in seen:
            raise ValueError(
                f"{origin}: duplicate token {token!r} at lines {seen[token] + 1} and {index + 1}."
            )
        seen[token] = index
    missing = [t for t in SPECIAL_TOKENS if t not in seen]
    if missing:
        raise ValueError(
            f"{origin}: the vocabulary lacks the BERT special tokens {missing} "
            f"(all of {list(SPECIAL_TOKENS)} are required)."
        )


def write_vocabulary(tokens, path, vocab_size=None, origin="vocabulary"):
    """Writes vocab.txt (one token per line, UTF-8) atomically: a temporary file, then a rename.

    Args:
        tokens: sequence of str, distinct, none empty or containing a line break.
        path: output path (local or gs://; its parent is created).
        vocab_size: int or None. The model's vocab_size the tokens must number.
        origin: str naming the tokens in errors, e.g. "vocab_file vocab.txt".

    Raises:
        ValueError: naming the problem: a count other than `vocab_size`, a token that is not
            one line, duplicate tokens.
    """
    import tensorflow as tf  # Here: the vocabulary command line's --help starts without TensorFlow.

    from keras_bert.io_utils import write_atomic

    tokens = [str(t) for t in tokens]
    if vocab_size is not None and len(tokens) != vocab_size:
        raise ValueError(
            f"{origin} has {len(tokens)} tokens but the model's vocab_size is {vocab_size}."
        )
    for token in tokens:
        if not token or len(token.splitlines()) != 1 or token.splitlines()[0] != token:
            raise ValueError(
                f"{origin}: token {token!r} cannot be written as one line of vocab.txt."
            )
    if len(set(tokens)) != len(tokens):
        dupes = [t for t, c in collections.Counter(tokens).items() if c > 1]
        raise ValueError(f"{origin} has duplicate tokens: {dupes[:10]}.")
    path = os.fspath(path)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent:
        tf.io.gfile.makedirs(parent)
    write_atomic(path, "".join(t + "\n" for t in tokens))


_SPECIAL_RE = re.compile(r"^\[[^\]]*\]$")  # [CLS], [unused0], ...


def cased_pieces(tokens):
    """The word pieces with an upper-case letter (bracketed special tokens aside)."""
    return [t for t in tokens if t != t.lower() and not _SPECIAL_RE.match(t)]


def vocabulary_is_uncased(tokens):
    """True when no token other than bracketed special tokens has an upper-case letter."""
    return not cased_pieces(tokens)


def _find_in_directory(directory):
    for relative in VOCAB_LOCATIONS:
        path = os.path.join(directory, relative)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"No vocabulary in directory {directory}: looked for {list(VOCAB_LOCATIONS)}."
    )


def _read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 ({e}).") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()  # Trailing newline(s) at the end of the file.
    return [line.rstrip("\r") for line in lines]
