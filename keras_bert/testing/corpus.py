"""A generated multilingual test corpus and a WordPiece vocabulary made from it.

Shared by the tokenizer and TFLite tests and bench/bench_tokenizer.py. Deterministic for a seed.
The lines mix ASCII prose, punctuation, accents, CJK, Hangul, Thai, Arabic, Hebrew,
Devanagari, emoji (with skin tones and zero-width joiners), control characters, invalid
or special code points (U+0000, U+FFFD, BOM, line separators), very long words (over
200 and 400 characters, ASCII and multi-byte), unknown words, compatibility characters
(½, ﬁ, ＡＢＣ, ², ℃, Ⅻ), Turkish İ, German ß/ẞ, Greek (including final ς), combining
marks and random code points from every plane.
"""

import collections
import random
import unicodedata

ENGLISH = (
    "the of and to in is was for on that with as by at from his her it an were are which "
    "this be or has had not but first one their its new after who they have two been "
    "other when there all during into school time may years more most only over city "
    "some world would where later up such used many can state about national out known "
    "university united then made between under these three both under until played "
    "century government season while team people game war album film music series "
    "number second because being however well since early part several also through "
    "language model token training transformer attention pre-training bidirectional"
).split()
ACCENTED = (
    "café naïve résumé fiancée Zürich Straße Größe über Ålesund São Paulo señor niño "
    "Ελληνικά λόγος Αθήνα οδός ΟΔΟΣ ΣΟΦΟΣ ΛΟΓΟΣ ΑΣ Σίσυφος Привет мир Москва ЁЛКА Київ "
    "İstanbul ıspanak Iğdır ẞ STRASSE Việt Nam tiếng Việt Ångström Dvořák Łódź Ærø "
    "e\u0301tude a\u0308\u0323 n\u0303 Å ﬀ ﬁne ﬂow ǅemal Ǆ ǈ"
).split()
CJK = (
    "中文 日本語 漢字 北京大学 东京 こんにちは カタカナ ひらがな 한국어 서울 안녕하세요 豈 更 "
    "你好世界 機器學習 深度學習 𠀀 𪜀 𫝀 丽 侮 ㈱ ㍻ 〇 「引用」 、 。"
).split()
OTHER_SCRIPTS = (
    "ภาษาไทย สวัสดี العربية مَرْحَبًا שָׁלוֹם עברית हिन्दी नमस्ते বাংলা தமிழ் ქართული Հայերեն ትግርኛ ᏣᎳᎩ ᠮᠣᠩᠭᠣᠯ"
).split()
EMOJI = (
    "😀 👍🏽 👨‍👩‍👧 🇯🇵 ❤️ 🏳️‍🌈 ✌🏿 🤖 🎉 ∑ ∞ ≈ € £ ¥ © ® ™ § ¶ † ‡ • … ‰ ′ ″ ‹ › « » “ ” ‘ ’ „ ¿ ¡"
).split()
COMPAT = (
    "½ ⅓ ¼ ﬁ ﬂ ﬃ ＡＢＣ ａｂｃ ｱｲｳ ０１２ ² ³ ¹ ℃ ℉ Ⅻ ⅻ Ⅳ ㎏ ㎞ ① ⑳ ™ ℡ № ſ µ ª º ẛ "
    "x² H₂O 10⁻³ ℌ 𝐀𝐁𝐂 𝓗 ﹏ ︵ ＂ ～ ￥ ﬃx ǳ ĳ"
).split()
SPECIAL = [
    "\t",
    "\r",
    "\n",
    "\x00",
    "\x07",
    "\x1b",
    "\x7f",
    "\x85",
    "\ufffd",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u200e",
    "\u200f",
    "\ufeff",
    "\u2028",
    "\u2029",
    "\u00a0",
    "\u3000",
    "\u2009",
    "\u180e",
    "\u00ad",
    "\U000e0041",
    "\ue000",
    "\U000f0000",
    "\u0378",
    "\u1b4e",
    "\U00011f43",
]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["--", "...", "'s", "n't", "—", "–"]


def _random_codepoint(rng):
    """A random assigned, non-surrogate code point from any plane."""
    while True:
        plane = rng.choice([0, 0, 0, 1, 2, 14])
        cp = plane * 0x10000 + rng.randrange(0x10000)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if unicodedata.category(chr(cp)) != "Cn" or rng.random() < 0.05:
            return chr(cp)


def _unknown_word(rng):
    letters = "qxzjkvwy" + "ʒþðŋæø"
    return "".join(rng.choice(letters) for _ in range(rng.randint(3, 12)))


def _long_word(rng):
    n = rng.choice([150, 199, 200, 201, 250, 399, 400, 401, 600])
    alphabet = rng.choice(["abcdefgh", "абвгдеж", "αβγδεζ", "ab", "日本", "é"])
    return "".join(rng.choice(alphabet) for _ in range(n))


def _english(rng):
    w = rng.choice(ENGLISH)
    return w.capitalize() if rng.random() < 0.15 else w.upper() if rng.random() < 0.03 else w


def _glued(rng):
    # Two pieces glued together: punctuation or controls inside words.
    return rng.choice(ENGLISH) + rng.choice(PUNCT + SPECIAL) + rng.choice(ENGLISH + ACCENTED)


# (weight, word generator)
_KINDS = [
    (45, _english),
    (13, lambda rng: rng.choice(ACCENTED)),
    (8, lambda rng: rng.choice(CJK)),
    (5, lambda rng: rng.choice(OTHER_SCRIPTS)),
    (4, lambda rng: rng.choice(EMOJI)),
    (5, lambda rng: rng.choice(COMPAT)),
    (6, lambda rng: rng.choice(PUNCT)),
    (3, _unknown_word),
    (3, lambda rng: str(rng.randint(0, 10 ** rng.randint(1, 7)))),
    (4, _glued),
    (4, lambda rng: "".join(_random_codepoint(rng) for _ in range(rng.randint(1, 4)))),
]


def _word(rng):
    kind = rng.choices([k for _, k in _KINDS], weights=[w for w, _ in _KINDS])[0]
    return kind(rng)


def generate_corpus(num_lines=3000, seed=0):
    """Returns `num_lines` str lines (some empty, some with only whitespace)."""
    rng = random.Random(seed)
    lines = []
    for i in range(num_lines):
        if i % 97 == 0:
            lines.append(rng.choice(["", " ", "\t\n", "\x00", "\u200b"]))
            continue
        words = [_word(rng) for _ in range(rng.randint(1, 30))]
        if rng.random() < 0.03:
            words.insert(rng.randrange(len(words) + 1), _long_word(rng))
        seps = [rng.choice([" ", " ", " ", "", "  ", "\t", "\u3000"] + SPECIAL[:3]) for _ in words]
        lines.append("".join(w + s for w, s in zip(words, seps)).strip(" "))
    return lines


def build_test_vocabulary(lines, basic_tokenizer, size=6000, seed=0):
    """A realistic WordPiece vocabulary for `lines`, made with the original's splitting.

    Frequent words become whole tokens, other words are cut into a prefix and "##" pieces
    of 1-4 characters; single characters and "##" characters are included except for a
    random tenth of them, so that some words come out as [UNK].

    Args:
        lines: list of str.
        basic_tokenizer: the original `BasicTokenizer` (cased or uncased).
        size: approximate number of tokens.

    Returns:
        list[str] starting with [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0, 100-style gaps not
        needed), then tokens sorted by frequency.
    """
    rng = random.Random(seed)
    words = collections.Counter()
    for line in lines:
        words.update(basic_tokenizer.tokenize(line))
    pieces = collections.Counter()
    chars = collections.Counter()
    for word, count in words.items():
        if len(word) > 60:
            continue
        chars.update({c: count for c in word[:1]})
        chars.update({"##" + c: count for c in word[1:]})
        start = 0
        while start < len(word):
            end = min(len(word), start + rng.randint(1, 4))
            pieces[("##" if start else "") + word[start:end]] += count
            start = end
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = list(special)
    seen = set(vocab)

    def add(token):
        if token not in seen and token.strip() == token and token:
            seen.add(token)
            vocab.append(token)

    for c, _ in chars.most_common():
        if rng.random() > 0.1:
            add(c)
    for w, _ in words.most_common(size // 3):
        if len(w) <= 60:
            add(w)
    for p, _ in pieces.most_common():
        if len(vocab) >= size:
            break
        add(p)
    return vocab
