"""A generated corpus and WordPiece vocabulary for the pre-training data tests (written to
tmp_path).

Words are a stem plus an optional suffix ("wa", "wa" + "ing" -> wa ##ing), so whole-word masking has
multi-piece words; every document has its own sentences of random words.
"""

import random

STEMS = [f"w{a}{b}" for a in "abcdefgh" for b in "abcdefgh"]
SUFFIXES = ["s", "ed", "ing"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY = SPECIAL + [".", ","] + STEMS + ["##" + s for s in SUFFIXES]


def write_vocab(path):
    path.write_text("\n".join(VOCABULARY) + "\n")
    return str(path)


def sentence(rng, min_words=3, max_words=20):
    words = [
        rng.choice(STEMS) + rng.choice(["", "", ""] + SUFFIXES)
        for _ in range(rng.randint(min_words, max_words))
    ]
    return " ".join(words) + " ."


def documents(num_documents, seed=0, max_sentences=12):
    """Lists of sentences; the first documents are long enough for real next-sentence pairs."""
    rng = random.Random(seed)
    return [
        [sentence(rng) for _ in range(rng.randint(1, max_sentences))] for _ in range(num_documents)
    ]


def write_corpus(path, docs):
    """The original format: one sentence per line, a blank line between documents."""
    path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n")
    return str(path)
