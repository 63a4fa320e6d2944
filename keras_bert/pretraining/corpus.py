"""Reading pre-training corpora as a stream of documents (lists of sentences).

Three file formats and tensorflow-datasets corpora, all streamed (one document in memory at a time):

- ``"sentences"``: the original BERT format. One sentence per line, a blank line between documents.
- ``"text"``: plain text. Paragraphs are separated by blank lines; the lines of a paragraph are
  joined (hard-wrapped text) and split into sentences by `split_sentences`. A file is one document;
  a very long file is cut into documents of at most `max_document_sentences` sentences.
- ``"lines"``: one document per line (e.g. a dump with one article per line), split into sentences.

Bytes that are not valid UTF-8 are replaced by U+FFFD with ``errors="replace"`` (the default) or
raise a `ValueError` naming the file and line with ``errors="strict"``.
"""

import re

from keras_bert import extras

# TensorFlow is imported where used (gs:// paths, tf.data): the command line lists FORMATS
# in --help without it.
FORMATS = ("sentences", "text", "lines")

# Words that end with a period without ending a sentence (compared lower-cased, without the period).
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al fig figs no nos vol pp p ed eds inc ltd co "
    "corp jan feb mar apr jun jul aug sep sept oct nov dec gen col lt sgt capt rev gov sen rep "
    "dept univ approx u.s u.k a.m p.m".split()
)
# A candidate boundary: terminal punctuation, optional closing quotes/brackets, then whitespace.
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+")
_CJK_BOUNDARY = re.compile(r"(?<=[\u3002\uff01\uff1f])")
_OPENERS = "\"'\u201c\u2018([\u00bf\u00a1"


def split_sentences(text):
    """Splits a paragraph into sentences with a small rule-based splitter (no NLP dependency).

    Rule: a sentence ends at ``.``, ``!`` or ``?`` (optionally followed by closing quotes or
    brackets) followed by whitespace and then an upper-case letter, a digit or an opening
    quote/bracket, unless the word before a ``.`` is a known abbreviation ("Dr.", "e.g.", "U.S.") or
    a single letter (an initial, "J. Smith"). CJK full stops (。！？) always end a sentence.
    Whitespace is normalized.

    Args:
      text: str, one paragraph.

    Returns:
      list of str sentences (empty for blank text).
    """
    text = " ".join(text.split())
    sentences = []
    for piece in _CJK_BOUNDARY.split(text):
        start = 0
        for match in _BOUNDARY.finditer(piece):
            end = match.end()
            if end >= len(piece):
                break
            following = piece[end]
            if not (following.isupper() or following.isdigit() or following in _OPENERS):
                continue
            if piece[match.start()] == "." and match.group().count(".") == 1:
                word = piece[start : match.start()].rsplit(" ", 1)[-1].lstrip(_OPENERS).lower()
                if len(word) <= 1 or word in _ABBREVIATIONS:
                    continue
            sentences.append(piece[start:end].strip())
            start = end
        sentences.append(piece[start:].strip())
    return [s for s in sentences if s]


def split_document(text, hard_wrapped=False):
    """Splits a document's text into sentences, paragraph by paragraph.

    Args:
      text: str.
      hard_wrapped: bool. True: paragraphs are separated by blank lines and their lines are joined.
        False: every line is a paragraph.

    Returns:
      list of str sentences.
    """
    if hard_wrapped:
        paragraphs = re.split(r"\n\s*\n", text)
    else:
        paragraphs = text.splitlines()
    return [s for p in paragraphs for s in split_sentences(p)]


def expand_input_files(input_files):
    """Expands comma-separated patterns / a list of patterns into a sorted list of existing files.

    Raises:
      FileNotFoundError: naming the pattern that matches no file.
    """
    if isinstance(input_files, str):
        input_files = input_files.split(",")
    files = []
    for pattern in input_files:
        pattern = str(pattern).strip()
        if not pattern:
            continue
        import tensorflow as tf

        matched = sorted(tf.io.gfile.glob(pattern))
        if not matched:
            raise FileNotFoundError(f"No input file matches {pattern!r}")
        files.extend(matched)
    if not files:
        raise FileNotFoundError("No input files given")
    return files


def _decoded_lines(path, errors):
    # Local files through Python's buffered reader (faster line iteration), others (gs://) through
    # gfile.
    if "://" in path:
        import tensorflow as tf

        opener = tf.io.gfile.GFile
    else:
        opener = open
    with opener(path, "rb") as reader:
        for number, raw in enumerate(reader, start=1):
            try:
                yield raw.decode("utf-8", errors=errors)
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{path}:{number}: invalid UTF-8 ({e.reason} at byte {e.start})"
                ) from e


def _sentence_file_documents(path, errors):
    document = []
    for line in _decoded_lines(path, errors):
        line = line.strip()
        if line:
            document.append(line)
        elif document:
            yield document
            document = []
    if document:
        yield document


def _text_file_documents(path, errors, max_document_sentences):
    document, paragraph = [], []

    def flush():
        document.extend(split_sentences(" ".join(paragraph)))
        paragraph.clear()

    for line in _decoded_lines(path, errors):
        if line.strip():
            paragraph.append(line)
            continue
        flush()
        while len(document) >= max_document_sentences:
            yield document[:max_document_sentences]
            del document[:max_document_sentences]
    flush()
    while document:
        yield document[:max_document_sentences]
        del document[:max_document_sentences]


def read_documents(
    input_files, file_format="sentences", errors="replace", max_document_sentences=10000
):
    """Streams documents from text files.

    Args:
      input_files: str (comma-separated glob patterns, local or gs://) or list of patterns.
      file_format: one of "sentences" (original format), "text" (plain text), "lines" (a document
        per line); see the module docstring.
      errors: "replace" (invalid UTF-8 becomes U+FFFD) or "strict" (raise ValueError).
      max_document_sentences: int, the longest document "text" files produce (bounds memory).

    Returns:
      an iterator of documents, each a list of str sentences (never empty). The arguments and file
      patterns are checked at the call (a pattern matching nothing raises here), the files read
      lazily.
    """
    if file_format not in FORMATS:
        raise ValueError(f"file_format must be one of {FORMATS}, got {file_format!r}")
    if errors not in ("replace", "strict"):
        raise ValueError(f"errors must be 'replace' or 'strict', got {errors!r}")
    if max_document_sentences < 1:
        raise ValueError(f"max_document_sentences must be >= 1, got {max_document_sentences}")
    return _read_files(expand_input_files(input_files), file_format, errors, max_document_sentences)


def _read_files(paths, file_format, errors, max_document_sentences):
    for path in paths:
        if file_format == "sentences":
            yield from _sentence_file_documents(path, errors)
        elif file_format == "text":
            yield from _text_file_documents(path, errors, max_document_sentences)
        else:
            for line in _decoded_lines(path, errors):
                sentences = split_sentences(line)
                if sentences:
                    yield sentences


def dataset_documents(dataset, field="text", hard_wrapped=False):
    """Streams documents from a tf.data.Dataset (or any iterable) of texts or of dicts with `field`.

    Args:
      dataset: tf.data.Dataset or iterable; elements are str/bytes/scalar string tensors, or dicts
        of them.
      field: str, the key of the text in dict elements.
      hard_wrapped: bool, passed to `split_document`.

    Yields:
      list of str sentences of one document (empty documents are skipped).
    """
    import tensorflow as tf

    if isinstance(dataset, tf.data.Dataset):
        dataset = dataset.as_numpy_iterator()
    for element in dataset:
        if isinstance(element, dict):
            if field not in element:
                raise KeyError(f"Corpus element has no field {field!r}; fields: {sorted(element)}")
            element = element[field]
        if hasattr(element, "numpy"):
            element = element.numpy()
        if isinstance(element, bytes):
            element = element.decode("utf-8", errors="replace")
        sentences = split_document(str(element), hard_wrapped=hard_wrapped)
        if sentences:
            yield sentences


def tfds_documents(name, split="train", field="text", data_dir=None, download=True):
    """Streams documents from a tensorflow-datasets text corpus (e.g. "wikipedia/20230601.en").

    Needs the dataset prepared in `data_dir` or network access to download and prepare it.

    Args:
      name: str, the tfds name (with config/version), e.g. "wikipedia/20230601.en".
      split: str, the tfds split.
      field: str, the text feature ("text" for wikipedia).
      data_dir: optional str, the tfds data directory.
      download: bool, passed to `tfds.load`.

    Yields:
      list of str sentences of one document (each line of the text is a paragraph).
    """
    tfds = extras.import_tfds()

    dataset = tfds.load(
        name, split=split, data_dir=data_dir, download=download, shuffle_files=False
    )
    yield from dataset_documents(dataset, field=field, hard_wrapped=False)
