"""In-graph NER answers: words from word pieces, IOB2 tags decoded into entities, character offsets.

Words are the tokenizer's own: it splits text at whitespace and punctuation (and around CJK
characters), then into WordPiece pieces; a piece without "##" opens a word. The tag of a word is
the model's tag on its first piece, as in training (`keras_bert.tasks.ner`). Tags decode into
entities as conlleval (and seqeval's default mode) reads them: B-X opens an entity, I-X continues
an entity of type X that the previous word is in, and any other I-X (after O, after another type,
at the start) opens one.

Offsets are in characters: Unicode code points of the text, with every ill-formed UTF-8 sequence
counting as one character (U+FFFD), as Python's `bytes.decode("utf-8", "replace")` counts them;
for a valid UTF-8 text, `text[start_char:end_char]` is the entity.

Dimensions: B batch, S sequence, C tags, M pieces (flat), W words (flat), E entities (flat).
"""

import tensorflow as tf

PAD_OFFSET = -1  # start_char / end_char of the padding after a row's entities.


def word_spans(ids, starts, ends, is_suffix):
    """The words of tokenized texts, flat over the batch.

    Args:
        ids: int32 ragged [B, (pieces)]; starts, ends: int64 ragged [B, (pieces)] byte offsets
            (`BertTokenizer.tokenize_with_offsets`).
        is_suffix: bool [V], the "##" pieces of the vocabulary.

    Returns:
        dict of [W] tensors: `row` (int32, the text), `piece` (int32, the position of the
        word's first piece among its text's pieces), `start`, `end` (int64 byte offsets of the
        whole word).
    """
    pieces = ids.flat_values  # (M,)
    opens = tf.logical_not(tf.gather(is_suffix, pieces))  # (M,)
    word = tf.cumsum(tf.cast(opens, tf.int32)) - 1  # (M,) the word of each piece
    num_words = tf.reduce_sum(tf.cast(opens, tf.int32))
    row = tf.cast(ids.value_rowids(), tf.int32)  # (M,)
    piece = tf.range(tf.size(pieces)) - tf.gather(tf.cast(ids.row_splits, tf.int32), row)  # (M,)
    first = tf.where(opens)[:, 0]  # (W,)
    return {"row": tf.gather(row, first), "piece": tf.gather(piece, first),
            "start": tf.gather(starts.flat_values, first),
            "end": tf.math.unsorted_segment_max(ends.flat_values, word, num_words)}


def decode_iob2(words, tag, labels):
    """Entities of tagged words (conlleval's rules, see the module docstring).

    Args:
        words: dict of [W] tensors from `word_spans`, in text order.
        tag: int32 [W], each word's tag index into `labels`.
        labels: list of str, the tags ("O", "B-PER", "I-PER", ...).

    Returns:
        dict of [E] tensors: `row` (int32), `type` (string), `start`, `end` (int64 bytes).
    """
    types = list(dict.fromkeys(label[2:] for label in labels if label != "O"))
    type_of = tf.constant([types.index(label[2:]) if label != "O" else -1 for label in labels])  # (C,)
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

    return {"row": first(row), "type": tf.gather(tf.constant(types + [""]), first(kind)),
            "start": first(words["start"]),
            "end": tf.math.unsorted_segment_max(tf.gather(words["end"], members), entity, count)}


def char_offsets(texts, row, *byte_offsets):
    """Byte offsets into texts -> code point offsets (ill-formed sequences count as U+FFFD).

    Args:
        texts: string [B]. row: int32 [N], the text of each offset. *byte_offsets: int64 [N]
            each, at character boundaries (or the text's end).

    Returns:
        list of int32 [N], one per `byte_offsets`: the characters before each offset in its text.
    """
    _, starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8", errors="replace")  # (B, (chars))
    base = tf.cumsum(tf.cast(tf.strings.length(texts), tf.int64), exclusive=True)  # (B,) bytes before each text
    flat = starts.flat_values + tf.gather(base, starts.value_rowids())  # (chars,) sorted over the batch
    before_row = tf.gather(starts.row_splits, row)  # (N,) chars of the texts before
    return [tf.cast(tf.searchsorted(flat, offsets + tf.gather(base, row), side="left", out_type=tf.int64) -
                    before_row, tf.int32) for offsets in byte_offsets]


def entity_outputs(texts, entities):
    """Entities flat over the batch -> padded answers [B, E_max] (see `signatures.token_classification`)."""
    row = entities["row"]
    start_char, end_char = char_offsets(texts, row, entities["start"], entities["end"])
    text = tf.strings.substr(tf.gather(texts, row), entities["start"], entities["end"] - entities["start"])
    nrows = tf.shape(texts, out_type=tf.int64)[0]

    def padded(values, pad):
        return tf.RaggedTensor.from_value_rowids(values, tf.cast(row, tf.int64), nrows=nrows).to_tensor(pad)

    return {"entity_text": padded(text, ""), "entity_type": padded(entities["type"], ""),
            "start_char": padded(start_char, PAD_OFFSET), "end_char": padded(end_char, PAD_OFFSET),
            "entity_count": tf.math.bincount(row, minlength=tf.cast(nrows, tf.int32), dtype=tf.int32)}
