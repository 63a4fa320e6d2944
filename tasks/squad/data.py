"""SQuAD data: the official JSON files (v1.1 and v2.0) as examples, and answers located in their
context.

The files hold `{"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id",
"question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}` (v2.0 adds
`is_impossible` and, for unanswerable questions, `plausible_answers`, which are not used).

Reading rules (the original run_squad.py's `read_squad_examples`, made strict):
- Malformed JSON, a missing or mistyped field, an empty context, a duplicate question id, or a
  file of the other SQuAD version is a `SquadDataError` naming the file and the record (article
  title, question id).
- Every question becomes one `SquadExample`, answers kept in file order with their character
  offsets (Python string indices, as the files count them). Questions without answers are kept
  (prediction needs no answer); v2.0 marks them `is_impossible` (a v2.0 record saying
  `is_impossible` while holding answers is an error).
- Training reads the first answer (the original demands exactly one) through `locate_answer`:
  its text at `answer_start`, or where the original would still find it (inside the
  whitespace-separated words that `answer_start` and the answer's length cover). A training
  example whose answer cannot be found there is skipped with a logged warning and counted, as the
  original skips it ("Could not find answer"); evaluation keeps every question.
"""

import dataclasses
import json
import os
from typing import Any

import tensorflow as tf

from keras_bert import extras

VERSIONS = ("1.1", "2.0")
# Our split names -> the file name stem and the tensorflow-datasets split.
SPLITS = {"train": ("train", "train"), "dev": ("dev", "validation")}


class SquadDataError(ValueError):
    """Bad SQuAD input: malformed file or record, named by file, article and question id."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one paragraph.

    Args:
        qas_id: str, the question id (predictions are keyed by it).
        question: str.
        context: str, the paragraph.
        answers: tuple of (text, answer_start) pairs, in file order; empty for an unanswerable
            (v2.0) or unlabelled question.
        is_impossible: bool, v2.0's flag (True iff there are no answers).
        title: str, the article's title (for messages).
    """

    qas_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False
    title: str = ""

    @property
    def answer_texts(self):
        return [text for text, _ in self.answers]


def data_file(data_dir, split, version):
    """The official file name of `split` in `data_dir`: train-v1.1.json, dev-v2.0.json, ..."""
    if split not in SPLITS:
        raise SquadDataError(f"Unknown SQuAD split {split!r}; splits: {', '.join(SPLITS)}.")
    if not data_dir:
        raise SquadDataError(
            f"SQuAD needs data_dir (holding {SPLITS[split][0]}-v{version}.json) or a file."
        )
    return os.path.join(data_dir, f"{SPLITS[split][0]}-v{version}.json")


def read_squad(path, version):
    """The examples of a SQuAD JSON file (local or gs://), in file order.

    Args:
        path: str, e.g. dev-v1.1.json.
        version: "1.1" or "2.0".

    Returns:
        list of `SquadExample`.

    Raises:
        SquadDataError: a missing or malformed file or record.
    """
    path = os.fspath(path)
    return parse_squad(load_json(path), version, where=path)


def load_json(path: str) -> Any:
    """The JSON of a SQuAD file (local or gs://), not yet checked as SQuAD.

    Raises:
        SquadDataError: a missing file, or one that is not JSON.
    """
    if not tf.io.gfile.exists(path):
        raise SquadDataError(f"SQuAD file not found: {path}.")
    with tf.io.gfile.GFile(path, "rb") as f:
        raw = f.read()
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SquadDataError(f"{path}: not valid JSON ({e}).") from None


def parse_squad(data, version, where="SQuAD data"):
    """`read_squad` on already loaded JSON (`where` names it in errors)."""
    if version not in VERSIONS:
        raise ValueError(f"SQuAD version must be one of {VERSIONS}, got {version!r}.")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SquadDataError(f"{where}: expected an object with a 'data' list of articles.")
    found = str(data.get("version", version)).lstrip("v")
    if found in VERSIONS and found != version:
        raise SquadDataError(
            f"{where}: the file is SQuAD {found}, read as SQuAD {version} "
            f"(task squad{found[0]} reads it)."
        )
    examples, seen = [], set()
    for number, article in enumerate(data["data"]):
        title = article.get("title", f"#{number}") if isinstance(article, dict) else f"#{number}"
        paragraphs = _field(article, "paragraphs", list, f"{where}: article {title!r}")
        for p, paragraph in enumerate(paragraphs):
            at = f"{where}: article {title!r}, paragraph {p}"
            qas = _field(paragraph, "qas", list, at)
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not context.strip():
                ids = [qa.get("id") for qa in qas if isinstance(qa, dict)]
                raise SquadDataError(
                    f"{at}: no context (an empty or missing 'context') for questions {ids}."
                )
            for qa in qas:
                example = _example(qa, context, title, version, at, seen)
                seen.add(example.qas_id)
                examples.append(example)
    return examples


def _example(qa, context, title, version, at, seen):
    qas_id = _field(qa, "id", (str, int), at)
    at = f"{at}, question {qas_id!r}"
    qas_id = str(qas_id)
    if qas_id in seen:
        raise SquadDataError(f"{at}: duplicate question id.")
    question = _field(qa, "question", str, at)
    answers = []
    for answer in _field(qa, "answers", list, at, default=[]):
        text = _field(answer, "text", str, f"{at}, answer")
        start = _field(answer, "answer_start", int, f"{at}, answer")
        if isinstance(start, bool) or not text:
            raise SquadDataError(
                f"{at}: an answer needs a non-empty 'text' and an integer 'answer_start'."
            )
        answers.append((text, start))
    is_impossible = False
    if version == "2.0":
        is_impossible = _field(qa, "is_impossible", bool, at, default=not answers)
        if is_impossible and answers:
            raise SquadDataError(f"{at}: is_impossible is true but the question has answers.")
        is_impossible = not answers
    return SquadExample(qas_id, question, context, tuple(answers), is_impossible, str(title))


def _field(record, name, types, at, default=None):
    if not isinstance(record, dict):
        raise SquadDataError(f"{at}: expected a JSON object, got {type(record).__name__}.")
    value = record.get(name, default)
    if value is None or not isinstance(value, types):
        raise SquadDataError(f"{at}: missing or mistyped field {name!r} (got {value!r}).")
    return value


def read_tfds(version, split, data_dir=None):
    """One split of tensorflow-datasets `squad/v1.1` or `squad/v2.0` (downloaded and prepared
    if needed) as examples, in the dataset's order."""
    tfds = extras.import_tfds()

    name = f"squad/v{version}"
    builder = tfds.builder(name, data_dir=data_dir)
    builder.download_and_prepare()
    dataset = builder.as_dataset(split=SPLITS[split][1], shuffle_files=False)
    articles = []
    for row in tfds.as_numpy(dataset):
        answers = row["answers"]
        qa = {
            "id": row["id"].decode(),
            "question": row["question"].decode("utf-8"),
            "answers": [
                {"text": t.decode("utf-8"), "answer_start": int(s)}
                for t, s in zip(answers["text"], answers["answer_start"])
            ],
        }
        articles.append(
            {
                "title": row["title"].decode("utf-8"),
                "paragraphs": [{"context": row["context"].decode("utf-8"), "qas": [qa]}],
            }
        )
    return parse_squad(
        {"version": version, "data": articles}, version, where=f"tfds {name}[{SPLITS[split][1]}]"
    )


def locate_answer(context, text, answer_start):
    """The character span [start, end) of an answer in `context`, or None where the original
    would not find it.

    The text itself at `answer_start`, else its first occurrence inside the whitespace-separated
    words covering [answer_start, answer_start + len(text)) (the region where the original's
    `read_squad_examples` looks for it).
    """
    if context.startswith(text, answer_start) and answer_start >= 0:
        return answer_start, answer_start + len(text)
    last = answer_start + len(text) - 1
    if answer_start < 0 or last >= len(context):
        return None
    first = answer_start
    while first > 0 and not _is_space(context[first - 1]):
        first -= 1
    while last + 1 < len(context) and not _is_space(context[last + 1]):
        last += 1
    found = context.find(text, first, last + 1)
    return None if found < 0 else (found, found + len(text))


def _is_space(char):
    """The original reader's whitespace (its words are split on these only)."""
    return char in " \t\r\n\u202f"
