"""Hostile text batches for the exported signatures: empty, blank, 1 MB, invalid UTF-8, control
characters, emoji and CJK, capital sigmas, over-long words, vocabulary sentences; batches of 1
to 1,000 rows of mixed lengths."""

import numpy as np
from finetune_cases import NEGATIVE, POSITIVE, WORDS

MEGABYTE = 1 << 20
BLANKS = [" ", "\t", "\n", "\r", "\u00a0", "\u3000", "\u2028", "\u200b", "\ufeff"]
SYMBOLS = [
    "🙂",
    "👍🏽",
    "🇯🇵",
    "東京",
    "中文字符",
    "한국어",
    "ｆｕｌｌ",
    "½",
    "ﬁ",
    "Σ",
    "ΣΑΣ",
    "ὈΔΥΣΣΕΎΣ",
    "é",
    "e\u0301",
    "ß",
    "İ",
    "ǅ",
    "\u0300",
    "\U0001d400",
    "\U000e0041",
    "\ufffd",
    "\U0010ffff",
    "<>&\"'",
    "...",
    "--",
]
CONTROLS = [chr(c) for c in list(range(0, 32)) + [127] + list(range(0x80, 0xA0))]


def _sentence(rng, words):
    return " ".join(str(w) for w in rng.choice(words, size=int(rng.integers(1, 40))))


def fuzz_text(rng, index):
    """One text (bytes) of a kind chosen by `index` (every kind recurs every 12 texts)."""
    kind = index % 12
    vocabulary = WORDS + POSITIVE + NEGATIVE + [".", ","]
    if kind == 0:
        return b""
    if kind == 1:
        return "".join(rng.choice(BLANKS, size=int(rng.integers(1, 20)))).encode()
    if kind == 2:
        return bytes(
            rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8)
        )  # Mostly invalid UTF-8.
    if kind == 3:
        return "".join(rng.choice(CONTROLS + vocabulary, size=int(rng.integers(1, 30)))).encode()
    if kind == 4:
        return " ".join(rng.choice(SYMBOLS + vocabulary, size=int(rng.integers(1, 30)))).encode()
    if kind == 5:
        return (
            "x" * int(rng.integers(190, 1000)) + " good"
        ).encode()  # A word over 200 characters: [UNK].
    if kind == 6:
        return _sentence(rng, vocabulary).upper().encode()
    if kind == 7:  # Random code points of every plane (surrogates excluded: not encodable).
        points = rng.integers(1, 0x110000, size=int(rng.integers(1, 50)))
        return "".join(chr(p) for p in points if not 0xD800 <= p < 0xE000).encode()
    if kind == 8:
        return (_sentence(rng, vocabulary) + " ").encode() * int(
            rng.integers(1, 20)
        )  # Long: truncated.
    if (
        kind == 9
    ):  # Words around ill-formed sequences (bad continuation, a surrogate, a cut 4-byte one).
        return (
            _sentence(rng, vocabulary).encode()
            + b"\xc3\x28 \xed\xa0\x80 \xf0\x9f\x98"
            + _sentence(rng, vocabulary).encode()
        )
    return _sentence(rng, vocabulary).encode()


def megabyte_text(rng):
    """About 1 MB of mixed words, symbols and blanks."""
    parts = rng.choice(WORDS + POSITIVE + NEGATIVE + SYMBOLS + [".", ","], size=MEGABYTE // 5)
    text = " ".join(str(p) for p in parts).encode()
    return text[:MEGABYTE]


def fuzz_batches(total, seed=0, sizes=(1, 3, 17, 64, 250)):
    """Batches (lists of bytes) holding `total` texts: sizes cycle through `sizes` (the last batch
    takes what is left); the first batch of each size over 1 also holds a 1 MB text."""
    rng = np.random.default_rng(seed)
    batches, count, index = [], 0, 0
    while count < total:
        size = min(sizes[len(batches) % len(sizes)], total - count)
        batch = [fuzz_text(rng, index + i) for i in range(size)]
        if size > 1 and len(batches) < len(sizes):
            batch[int(rng.integers(size))] = megabyte_text(rng)
        batches.append(batch)
        count, index = count + size, index + size
    return batches
