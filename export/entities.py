"""In-graph NER answers: words from word pieces, IOB2 tags decoded into entities, character offsets.

Words are the tokenizer's own: it splits text at whitespace and punctuation (and around CJK
characters), then into WordPiece pieces; a piece without "##" opens a word. The tag of a word is
the model's tag on its first piece, as in training (`keras_bert.tasks.ner.task`). Tags decode into
entities as conlleval (and seqeval's default mode) reads them: B-X opens an entity, I-X continues
an entity of type X that the previous word is in, and any other I-X (after O, after another type,
at the start) opens one.

Offsets are in characters: Unicode code points of the text, with every ill-formed UTF-8 sequence
counting as one character (U+FFFD), as Python's `bytes.decode("utf-8", "replace")` counts them;
for a valid UTF-8 text, `text[start_char:end_char]` is the entity.

Every op here has a TFLite builtin or a tensorflow-text TFLite kernel (the same graph serves as a
SavedModel and converts to TFLite, `keras_bert.export.tflite`): int32 offsets, byte values and
substrings from tensorflow-text's `ByteSplitter`, no string or ragged ops of TensorFlow's own.

Dimensions: B batch, S sequence, C tags, M pieces (flat), W words (flat), E entities (flat),
L bytes (flat).
"""

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert.text.tokenizer import row_ids

PAD_OFFSET = -1  # start_char / end_char of the padding after a row's entities.


def word_spans(ids, starts, ends, is_suffix):
    """The words of tokenized texts, flat over the batch.

    Args:
        ids: int32 ragged [B, (pieces)]; starts, ends: int64 ragged [B, (pieces)] byte offsets
            (`BertTokenizer.tokenize_with_offsets`).
        is_suffix: bool [V], the "##" pieces of the vocabulary.

    Returns:
        dict of [W] tensors: `row` (int32, the text), `piece` (int32, the position of the
        word's first piece among its text's pieces), `start`, `end` (int32 byte offsets of the
        whole word).
    """
    pieces = ids.flat_values  # (M,)
    opens = tf.logical_not(tf.gather(is_suffix, pieces))  # (M,)
    word = tf.cumsum(tf.cast(opens, tf.int32)) - 1  # (M,) the word of each piece
    num_words = tf.reduce_sum(tf.cast(opens, tf.int32))
    row = row_ids(ids)  # (M,)
    piece = tf.range(tf.size(pieces)) - tf.gather(tf.cast(ids.row_splits, tf.int32), row)  # (M,)
    first = tf.where(opens)[:, 0]  # (W,)
    starts, ends = (
        tf.cast(offsets.flat_values, tf.int32) for offsets in (starts, ends)
    )  # (M,) each
    return {
        "row": tf.gather(row, first),
        "piece": tf.gather(piece, first),
        "start": tf.gather(starts, first),
        "end": tf.math.unsorted_segment_max(ends, word, num_words),
    }


def decode_iob2(words, tag, labels):
    """Entities of tagged words (conlleval's rules, see the module docstring).

    Args:
        words: dict of [W] tensors from `word_spans`, in text order.
        tag: int32 [W], each word's tag index into `labels`.
        labels: list of str, the tags ("O", "B-PER", "I-PER", ...).

    Returns:
        dict of [E] tensors: `row` (int32), `type` (int32, the index of the entity type in
        `entity_types(labels)`), `start`, `end` (int32 bytes).
    """
    types = entity_types(labels)
    type_of = tf.constant(
        [types.index(label[2:]) if label != "O" else -1 for label in labels]
    )  # (C,)
    begin_tag = tf.constant([label.startswith("B-") for label in labels])  # (C,)
    kind = tf.gather(type_of, tag)  # (W,) -1 for O
    row = words["row"]
    previous = tf.concat([[-1], kind], 0)[:-1]  # (W,) the previous word's type, in its text
    previous = tf.where(row != tf.concat([[-1], row], 0)[:-1], -1, previous)
    inside = kind >= 0
    opens = inside & (tf.gather(begin_tag, tag) | (previous != kind))  # (W,)
    entity = tf.cumsum(tf.cast(opens, tf.int32)) - 1  # (W,) the entity of each inside word
    count = tf.reduce_sum(tf.cast(opens, tf.int32))
    members = tf.where(inside)[:, 0]
    entity = tf.gather(entity, members)

    def first(values):
        return tf.boolean_mask(values, opens)

    return {
        "row": first(row),
        "type": first(kind),
        "start": first(words["start"]),
        "end": tf.math.unsorted_segment_max(tf.gather(words["end"], members), entity, count),
    }


def entity_types(labels):
    """The entity types of IOB2 tags, in order of first occurrence ("B-PER", "I-PER" -> "PER")."""
    return list(dict.fromkeys(label[2:] for label in labels if label != "O"))


def char_offsets(texts, row, *byte_offsets):
    """Byte offsets into texts -> code point offsets (ill-formed sequences count as U+FFFD).

    Args:
        texts: string [B]. row: int32 [...], the text of each offset. *byte_offsets: int32
            [...] each (the shape of `row`), at character boundaries (or the text's end).

    Returns:
        list of int32 [...], one per `byte_offsets`: the characters before each offset in its text.
    """
    values = tf_text.ByteSplitter().split(texts)  # uint8 (B, (bytes))
    starts = tf.cond(  # (L + 1,) characters before each byte (an IF in TFLite)
        tf.reduce_all(tf.cast(values.flat_values, tf.int32) < 0x80),
        lambda: tf.range(tf.size(values.flat_values) + 1),  # ASCII: a character per byte
        lambda: tf.concat([[0], tf.cumsum(_character_starts(values))], 0),
    )
    base = tf.gather(tf.cast(values.row_splits, tf.int32), row)  # (...) the text's first byte
    return [tf.gather(starts, base + offsets) - tf.gather(starts, base) for offsets in byte_offsets]


def _utf8_tables():
    """Per lead byte: continuation bytes it takes (0-3), and the range of its second byte (Unicode
    Table 3-7, well-formed UTF-8; a byte that is no lead takes none)."""
    need = np.zeros(256, np.int32)
    need[0xC2:0xE0], need[0xE0:0xF0], need[0xF0:0xF5] = 1, 2, 3
    low, high = np.full(256, 0x80, np.int32), np.full(256, 0xBF, np.int32)
    low[0xE0], high[0xED], low[0xF0], high[0xF4] = 0xA0, 0x9F, 0x90, 0x8F
    return need, low, high


def _character_starts(values):
    """int32 [L]: 1 where a byte starts a character of `bytes.decode("utf-8", "replace")`.

    That decoder replaces each maximal ill-formed subpart (Unicode's "U+FFFD substitution of
    maximal subparts") by one U+FFFD: a byte starts a character unless it continues a lead byte
    at most 3 bytes before it in its text, each byte in between well-formed after that lead.
    """
    need, low, high = (tf.constant(t) for t in _utf8_tables())
    flat = tf.cast(values.flat_values, tf.int32)  # (L,)
    position = tf.range(tf.size(flat)) - tf.gather(
        tf.cast(values.row_splits, tf.int32), row_ids(values)
    )  # (L,)

    def back(d):  # (L,) the byte d before each one (0, an ASCII byte, before the text).
        return tf.where(
            position >= d, tf.concat([tf.zeros([d], tf.int32), flat], 0)[: tf.size(flat)], 0
        )

    def second(lead, byte):  # Could `byte` follow `lead` as its second byte?
        return (byte >= tf.gather(low, lead)) & (byte <= tf.gather(high, lead))

    def continuation(byte):
        return (byte >= 0x80) & (byte <= 0xBF)

    b1, b2, b3 = back(1), back(2), back(3)
    continues = (tf.gather(need, b1) >= 1) & second(b1, flat)
    continues |= (tf.gather(need, b2) >= 2) & second(b2, b1) & continuation(flat)
    continues |= (tf.gather(need, b3) == 3) & second(b3, b2) & continuation(b1) & continuation(flat)
    return 1 - tf.cast(continues, tf.int32)


def substrings(texts, starts, ends):
    """string [B, N]: the bytes [starts, ends) of each text (int32 [B, N] each), "" where start ==
    end."""
    shape = tf.shape(starts)  # (B, N)
    splits = tf.range(shape[0] + 1, dtype=tf.int64) * tf.cast(shape[1], tf.int64)

    def ragged(offsets):
        return tf.RaggedTensor.from_row_splits(tf.reshape(offsets, [-1]), splits, validate=False)

    pieces = tf_text.ByteSplitter().split_by_offsets(
        texts, ragged(starts), ragged(ends)
    )  # (B, (N))
    return tf.reshape(pieces.flat_values, shape)


def entity_outputs(texts, entities, types):
    """Entities flat over the batch -> padded answers [B, E_max] (see
    `signatures.token_classification`).

    Args:
        texts: string [B]. entities: dict from `decode_iob2`. types: list of str, `entity_types`.
    """
    row = entities["row"]  # (E,) in text order
    size = tf.size(
        texts
    )  # (One segment more: TFLite's segment sum over no segments answers a malformed tensor.)
    count = tf.math.unsorted_segment_sum(tf.ones_like(row), row, size + 1)[:size]  # (B,)
    position = tf.range(tf.reduce_max(tf.concat([count, [0]], 0)))[tf.newaxis, :]  # (1, E_max)
    inside = position < count[:, tf.newaxis]  # (B, E_max)
    index = tf.where(
        inside, tf.cumsum(count, exclusive=True)[:, tf.newaxis] + position, tf.size(row)
    )  # (B, E_max)

    def padded(values, pad):  # (E,) -> (B, E_max): the row's entities, then `pad`.
        return tf.gather(tf.concat([values, [pad]], 0), index)

    start, end = padded(entities["start"], 0), padded(entities["end"], 0)  # (B, E_max) bytes
    rows = tf.broadcast_to(tf.range(tf.size(texts))[:, tf.newaxis], tf.shape(index))  # (B, E_max)
    start_char, end_char = (
        tf.where(inside, c, PAD_OFFSET) for c in char_offsets(texts, rows, start, end)
    )
    return {
        "entity_text": substrings(texts, start, end),
        "entity_type": tf.gather(tf.constant(types + [""]), padded(entities["type"], len(types))),
        "start_char": start_char,
        "end_char": end_char,
        "entity_count": count,
    }
