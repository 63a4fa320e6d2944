"""The benchmarks' shared NER scoring (`bench/common.py`): exported entities back to word tags."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import common  # noqa: E402

WORDS = ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]
TAGS = ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]


def entities_of(words, tags):
    """The entities an export would give for gold IOB2 tags: (text, type, start, end) in the
    words joined by spaces."""
    text, starts = " ".join(words), np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    found, i = [], 0
    while i < len(words):
        if tags[i] == "O":
            i += 1
            continue
        kind, j = tags[i][2:], i + 1
        while j < len(words) and tags[j] == f"I-{kind}":
            j += 1
        start, end = int(starts[i]), int(starts[j - 1]) + len(words[j - 1])
        found.append((text[start:end], kind, start, end))
        i = j
    return tuple(found)


def test_word_tags_invert_the_entities_of_gold_tags():
    for words, tags in [
        (WORDS, TAGS),
        (
            ["Peter", "Blackburn", "in", "New", "York", "City"],
            ["B-PER", "I-PER", "O"] + ["B-LOC", "I-LOC", "I-LOC"],
        ),
        (["A", "B"], ["B-PER", "B-PER"]),  # Two entities side by side.
        (["nothing", "here"], ["O", "O"]),
    ]:
        assert common.word_tags(words, entities_of(words, tags)) == tags


def test_an_entity_inside_a_word_tags_words_by_their_start():
    words = ["U.S.", "-based", "Anti-Soviet"]
    text = " ".join(words)
    us = (text[:3], "LOC", 0, 3)  # "U.S", the tokenizer's words without the last "."
    soviet = ("Soviet", "MISC", text.index("Soviet"), len(text))
    assert common.word_tags(words, (us, soviet)) == ["B-LOC", "O", "O"]


def test_ner_answers_read_the_padded_outputs():
    out = {
        "entity_count": np.array([2, 0]),
        "entity_text": np.array([[b"EU", b"German"], [b"", b""]]),
        "entity_type": np.array([[b"ORG", b"MISC"], [b"", b""]]),
        "start_char": np.array([[0, 11], [-1, -1]]),
        "end_char": np.array([[2, 17], [-1, -1]]),
    }
    answers = common.ner_answers(out)
    assert answers == [(("EU", "ORG", 0, 2), ("German", "MISC", 11, 17)), ()]
    assert common.word_tags(WORDS, answers[0])[:3] == ["B-ORG", "O", "B-MISC"]
