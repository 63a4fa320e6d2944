"""The original BERT text normalization, compiled into a FastBertNormalizer model.

The original `BasicTokenizer` (google-research/bert `tokenization.py`, copied into
tf-models-official as `official.nlp.tools.tokenization`) cleans the text (drops U+0000,
U+FFFD and the characters of category Cc and Cf except tab, newline and carriage
return; maps whitespace to a space), optionally lower-cases, applies NFD and drops
category Mn, then splits on whitespace (`str.split`, which also splits at U+2028 and
U+2029) and punctuation (ASCII symbols and category P*) and around CJK ideographs. All
of it is a per-character mapping except the splitting, which tensorflow-text's
FastWordpieceTokenizer does itself (with ICU's tables: see `OP_SPLIT_WORD_CHARS`).

tensorflow-text's stock normalizer model differs from the original: it case-folds with
NFKC (½ -> 1⁄2, ﬁ -> fi, Ａ -> a, ² -> 2, ℃ -> °c, Ⅻ -> xii) and turns control and
format characters into spaces instead of deleting them (a\x07b is one word in the
original). This module builds a model of the same flatbuffer format from Python's own
`unicodedata` (the tables the original tokenizer uses), so the in-graph op reproduces
the original character by character and still runs in TFLite (same custom op).

The model is a darts-clone double-array trie keyed by the UTF-8 bytes of one code point
(`fast_bert_normalizer.h`); identical sub-tries are shared (a DAWG), which keeps the
tables of ill-formed byte sequences small.

Invalid UTF-8: the op steps over bytes with ICU's `U8_FWD_1`, which isolates the same
maximal ill-formed subsequences as Python's UTF-8 decoder; each one maps to "" here, so
invalid bytes are deleted exactly as the original's `convert_to_unicode` does
(`bytes.decode("utf-8", "ignore")`).

Context: Python's `str.lower` writes capital sigma as ς at the end of a word, which no
per-character map can express; the tokenizer applies that rule in the graph
(`tokenizer.FinalSigma`) with the extra models built here (Σ kept, Σ -> "σς", classes).

Residual difference (documented):
- Uncased: NFD is applied per character, without canonical reordering across
  characters; only input holding two or more spacing marks (Mc) with non-zero
  combining classes out of canonical order (38 code points, e.g. musical symbols
  U+1D165..U+1D172) could give other ids.
"""

import functools
import unicodedata

import flatbuffers
import numpy as np

# Bit layout of a normalizer value (fast_bert_normalizer.h).
_DIFFERENT = 0x40000000
_LEN_BITS = 6
_MAX_LEN = (1 << _LEN_BITS) - 1

# Characters that the original keeps inside a word but FastWordpiece's pre-tokenizer
# splits on: punctuation that ICU's newer Unicode assigns where Python 3.11's
# unicodedata (Unicode 14) has none (Cn). A test sweeps every code point through the
# op to keep this list complete.
OP_SPLIT_WORD_CHARS = frozenset(
    [0x1B4E, 0x1B4F, 0x1B7F, 0x10D6E, 0x113D4, 0x113D5, 0x113D7, 0x113D8]
    + list(range(0x11B00, 0x11B0A))
    + [0x11BE1]
    + list(range(0x11F43, 0x11F50))
    + [0x16D6D, 0x16D6E, 0x16D6F, 0x1E5FF]
)

# Each of them is replaced by its own private-use stand-in (plane 16, which the op keeps
# inside words), in the text by the normalizer and in the vocabulary tokens given to the
# op (`op_vocabulary`), so words holding them get the original's ids. Inexact only when
# the input itself holds one of these stand-ins and the vocabulary the replaced
# character.
WORD_CHAR_SUBSTITUTES = {cp: chr(0x10FFFD - i) for i, cp in enumerate(sorted(OP_SPLIT_WORD_CHARS))}


def is_whitespace(char):
    """The original `_is_whitespace`: space, tab, newline, carriage return or Zs."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char):
    """The original `_is_control`: category Cc or Cf except tab, newline, return."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    """The original `_is_punctuation`: ASCII symbol ranges or category P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk(cp):
    """The original `_is_chinese_char` ranges (CJK unified and compatibility ideographs)."""
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def normalize_char(char, lower_case):
    """What the original makes of one character before splitting.

    Args:
        char: str, one code point.
        lower_case: bool, whether the original lower-cases and strips accents.

    Returns:
        str: "" (deleted), " " (whitespace) or the normalized character(s).
    """
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or is_control(char):
        return ""
    if is_whitespace(char) or char.isspace():
        # `char.isspace()`: the original splits words with `str.split()`, which also
        # splits at U+2028 and U+2029 (categories Zl, Zp) that `_clean_text` keeps.
        return " "
    if not lower_case:
        return char
    decomposed = unicodedata.normalize("NFD", char.lower())
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


@functools.lru_cache(maxsize=2)
def character_map(lower_case):
    """Normalized strings for every code point that the op must change.

    Args:
        lower_case: bool.

    Returns:
        (values, pool): `values` int64 [0x110000], -1 for unchanged code points, else an
        index into `pool`, the list of distinct normalized strings ("" first).
    """
    values = np.full(0x110000, -1, np.int64)
    pool = [""]
    index = {"": 0}
    category = unicodedata.category
    for cp in range(1, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # Surrogates are not valid UTF-8; their bytes are handled as invalid.
        char = chr(cp)
        if category(char) in ("Cn", "Co") and cp not in OP_SPLIT_WORD_CHARS:
            continue  # Kept as they are (fast path for the unassigned planes).
        out = normalize_char(char, lower_case)
        if out and out != " ":
            out = "".join(map(_keep_in_word, out))
        if out == char:
            continue
        if out not in index:
            index[out] = len(pool)
            pool.append(out)
        values[cp] = index[out]
    values[0] = 0
    return values, pool


@functools.lru_cache(maxsize=1)
def _substitutes():
    # Only characters that this Python's tables keep inside words.
    return {
        cp: sub
        for cp, sub in WORD_CHAR_SUBSTITUTES.items()
        if normalize_char(chr(cp), False) == chr(cp) and not is_punctuation(chr(cp))
    }


def _keep_in_word(char):
    return _substitutes().get(ord(char), char)


def op_vocabulary(vocabulary):
    """The vocabulary as the op must see it: stand-ins for `OP_SPLIT_WORD_CHARS`."""
    table = _substitutes()
    return [token.translate(table) for token in vocabulary]


@functools.lru_cache(maxsize=4)
def build_model_buffer(lower_case, capital_sigma=None):
    """Returns the FastBertNormalizerModel flatbuffer (bytes) of the original's rules.

    Built once per process and setting (about a second).

    Args:
        lower_case: bool, lower-case + NFD + strip Mn as the original uncased models.
        capital_sigma: None, or what U+03A3 becomes instead (the final-sigma rule of
            `str.lower` depends on the context: see `tokenizer.FinalSigma`).
    """
    values, pool = character_map(lower_case)
    if capital_sigma is not None:
        values, pool = values.copy(), pool + [capital_sigma]
        values[0x3A3] = -1 if capital_sigma == "\u03a3" else len(pool) - 1
    return _model_buffer(values, pool, lower_case)


# Classes for the final-sigma rule of `str.lower` (U+03A3 becomes ς when the nearest
# non-case-ignorable character before it is cased and the one after it is not).
CASED, OTHER, SIGMA = "C", "N", "S"


@functools.lru_cache(maxsize=1)
def build_case_class_buffer():
    """A normalizer model mapping each character to its class for the final-sigma rule:
    "S" (U+03A3), "C" (cased, not case-ignorable), "" (case-ignorable), "N" (other).

    The classes are read off Python's own `str.lower` (the original's lower-casing)."""
    pool = ["", CASED, OTHER, SIGMA]
    values = np.full(0x110000, 2, np.int64)  # OTHER
    category = unicodedata.category
    for cp in range(1, 0x110000):
        char = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or category(char) in ("Cn", "Co"):
            continue
        after_cased = ("\u0391" + char + "\u03a3").lower()[-1] == "\u03c2"  # CI or cased
        alone = (char + "\u03a3").lower()[-1] == "\u03c2"  # cased and not CI
        values[cp] = 1 if alone else 0 if after_cased else 2
    values[0x3A3] = 3
    for cp, text in enumerate(pool):
        if len(text) == 1 and values[ord(text)] == cp:
            values[ord(text)] = -1  # Maps to itself: no entry.
    values[0] = 0
    return _model_buffer(values, pool, False)


@functools.lru_cache(maxsize=1)
def build_restore_buffer():
    """A normalizer model that maps the stand-ins of `op_vocabulary` back (detokenize)."""
    return build_map_buffer(tuple((ord(sub), chr(cp)) for cp, sub in _substitutes().items()))


@functools.lru_cache(maxsize=4)
def build_map_buffer(mapping):
    """A normalizer model changing only the code points of `mapping` ((cp, str), ...)."""
    values = np.full(0x110000, -1, np.int64)
    pool = [""]
    for cp, text in mapping:
        values[cp] = len(pool)
        pool.append(text)
    return _model_buffer(values, pool, False)


def _model_buffer(values, pool, lower_case):
    # Encode the pool: one value per distinct normalized string.
    blob = bytearray()
    codes = np.zeros(len(pool), np.int64)
    for i, text in enumerate(pool):
        data = text.encode("utf-8")
        if len(data) > _MAX_LEN:
            raise ValueError(f"normalized string too long: {text!r}")
        codes[i] = _DIFFERENT | (len(blob) << _LEN_BITS) | len(data)
        blob += data
    leaf = np.where(values >= 0, codes[np.maximum(values, 0)], 0)
    trie = _build_utf8_trie(leaf, codes[0])
    return _flatbuffer(lower_case, trie, int(codes[0]), bytes(blob))


def _flatbuffer(lower_case, trie, data_for_zero, pool):
    builder = flatbuffers.Builder(4 * len(trie) + len(pool) + 1024)
    pool_vec = builder.CreateNumpyVector(np.frombuffer(pool or b"\0", np.uint8))
    trie_vec = builder.CreateNumpyVector(trie.astype(np.uint32))
    builder.StartObject(4)
    builder.PrependBoolSlot(0, lower_case, False)
    builder.PrependUOffsetTRelativeSlot(1, trie_vec, 0)
    builder.PrependInt32Slot(2, data_for_zero, 0)
    builder.PrependUOffsetTRelativeSlot(3, pool_vec, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


# === UTF-8 trie as a DAWG ===


class _Dawg:
    """Hash-consed trie nodes: (leaf value or 0, ((label, child), ...)) -> node id."""

    def __init__(self):
        self.ids = {}
        self.nodes = []

    def node(self, leaf, children):
        key = (int(leaf), tuple(children))
        if key not in self.ids:
            self.ids[key] = len(self.nodes)
            self.nodes.append(key)
        return self.ids[key]

    def leaf(self, value):
        return self.node(value, ())


def _build_utf8_trie(leaf, drop):
    """Double array for keys = UTF-8 of each code point (and each ill-formed subpart).

    `leaf[cp]` is the value of code point cp (0: no key). Every ill-formed maximal
    subpart that ICU's U8_FWD_1 isolates (a lone or truncated lead byte, a stray
    continuation byte, C0/C1/F5..FF) gets the value `drop`.
    """
    dawg = _Dawg()
    drop = int(drop)
    last_level = {}

    def seq(prefix_cp, shift, trail_ranges):
        # Node after a lead byte (and some trails); returns node id or None.
        lo, hi = trail_ranges[0]
        children = []
        if len(trail_ranges) == 1:  # Last byte: leaves, hash-consed by their values.
            start = prefix_cp | (lo & 0x3F)
            values = leaf[start : start + hi - lo + 1]
            key = (lo, values.tobytes())
            if key not in last_level:
                children = [(lo + i, dawg.leaf(v)) for i, v in enumerate(values.tolist()) if v]
                last_level[key] = dawg.node(drop, children)
            return last_level[key]
        for byte in range(lo, hi + 1):
            child = seq(prefix_cp | ((byte & 0x3F) << shift), shift - 6, trail_ranges[1:])
            if child is not None:
                children.append((byte, child))
        return dawg.node(drop, children)  # Truncated here: an ill-formed subpart.

    root_children = []
    for byte in range(1, 0x80):
        if leaf[byte]:
            root_children.append((byte, dawg.node(leaf[byte], ())))
    for byte in range(0x80, 0x100):
        if 0xC2 <= byte <= 0xDF:
            node = seq((byte & 0x1F) << 6, 0, [(0x80, 0xBF)])
        elif 0xE0 <= byte <= 0xEF:
            second = (
                (0xA0, 0xBF) if byte == 0xE0 else (0x80, 0x9F) if byte == 0xED else (0x80, 0xBF)
            )
            node = seq((byte & 0x0F) << 12, 6, [second, (0x80, 0xBF)])
        elif 0xF0 <= byte <= 0xF4:
            second = (
                (0x90, 0xBF) if byte == 0xF0 else (0x80, 0x8F) if byte == 0xF4 else (0x80, 0xBF)
            )
            node = seq((byte & 0x07) << 18, 12, [second, (0x80, 0xBF), (0x80, 0xBF)])
        else:
            node = dawg.node(drop, ())  # Stray continuation byte, C0, C1, F5..FF.
        root_children.append((byte, node))
    root = dawg.node(0, root_children)
    return _place(dawg, root)


def _place(dawg, root):
    """Lays the DAWG out as a darts-clone double array (uint32 units)."""
    size = 1 << 12
    used = np.zeros(size, bool)
    used[0] = True  # The root unit.
    base = {}
    candidates = np.arange(256)
    first_free_block = 0
    for node_id, (leaf, children) in enumerate(dawg.nodes):
        labels = np.array(([0] if leaf else []) + [c for c, _ in children], np.int64)
        if len(labels) == 0:
            continue
        block = first_free_block
        while True:
            if (block + 1) * 256 > size:
                used = np.concatenate([used, np.zeros(size, bool)])
                size *= 2
            free = ~used[block * 256 : (block + 1) * 256]
            ok = free[candidates[:, None] ^ labels[None, :]].all(axis=1)
            if ok.any():
                b = block * 256 + int(np.argmax(ok))
                break
            block += 1
        used[b ^ labels] = True
        base[node_id] = b
        while used[first_free_block * 256 : (first_free_block + 1) * 256].all():
            first_free_block += 1
    if size > (1 << 21):
        raise ValueError("normalizer trie too large for darts-clone offsets")
    units = np.zeros(int(np.nonzero(used)[0].max()) + 1, np.uint64)

    def unit(pos, label, node_id):
        leaf, children = dawg.nodes[node_id]
        value = label
        if leaf:
            value |= 1 << 8
        if leaf or children:
            value |= (pos ^ base[node_id]) << 10
        return value

    units[0] = unit(0, 0, root)
    for node_id, (leaf, children) in enumerate(dawg.nodes):
        if node_id not in base:
            continue
        b = base[node_id]
        if leaf:
            units[b] = (1 << 31) | leaf
        for label, child in children:
            units[b ^ label] = unit(b ^ label, label, child)
    return units.astype(np.uint32)
