"""The sizes of the windows over long texts (`keras_bert.text.windows.pack_windows`), shared by
training (`keras_bert.tasks.long_text`, `keras_bert.tasks.features`) and every export
(`keras_bert.export.signatures`), so that a model is served with the windows it was trained on.

Plain Python: `keras_bert.tasks.long_text`, which the command lines read before TensorFlow loads,
takes its defaults from here.
"""

MAX_WINDOWS = 16  # Windows read per text by default (the sentence tasks' and NER's exports).


def max_first_length(seq_length: int) -> int:
    """Tokens of a pair's first text kept beside the windows of its second: half of what the
    row holds besides [CLS] [SEP] [SEP]."""
    return (int(seq_length) - 3) // 2


def smallest_window(seq_length: int, pair: bool) -> int:
    """Tokens of the second text (or the single text) in the smallest window."""
    if pair:
        return int(seq_length) - 3 - max_first_length(seq_length)
    return int(seq_length) - 2


def resolve_stride(seq_length: int, pair: bool, doc_stride: int | None) -> int:
    """The doc stride of a run: `doc_stride`, or half the smallest window.

    Raises:
        ValueError: a stride not below the smallest window (windows would skip tokens), or a
            seq_length leaving no room for a window.
    """
    window = smallest_window(seq_length, pair)
    if window < 2:
        raise ValueError(f"seq_length {seq_length} leaves no room for windows of a long text.")
    if doc_stride is None:
        return window // 2
    if not 1 <= int(doc_stride) < window:
        kind = (
            f"the second text (after {max_first_length(seq_length)} tokens of the first)"
            if (pair)
            else "a text"
        )
        raise ValueError(
            f"doc_stride {doc_stride} must be below the window ({window} tokens of {kind} at "
            f"seq_length {seq_length}), or windows would skip tokens."
        )
    return int(doc_stride)
