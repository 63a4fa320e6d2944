"""Feature extraction (paper §5.3; the original extract_features.py): the encoder's hidden
states for each input, as JSON lines.

    python -m keras_bert.tasks.extract_features --input_file=in.txt --output_file=out.jsonl \\
        --init_checkpoint=uncased_L-12_H-768_A-12 --layers=-1,-2,-3,-4 [--pooling=mean] \\
        [--vocab_file=vocab.txt --lower_case] [--max_seq_length=128 --batch_size=32]

Input: one example per line, UTF-8; "text_a ||| text_b" is a pair (as the original: "|||"
with white space or the line's end around it; "a|||b" is one text). Defined behaviour:
- an empty line gives the features of "[CLS] [SEP]", so output line i is input line i (as
  the original, which stops only at the end of the file); the count is logged;
- a "|||" with nothing on one side, or more than one "|||", is an error naming the line;
- invalid UTF-8 is an error naming the line and byte (the original fails to decode too);
- texts longer than max_seq_length are truncated longest-first, as the original.

Layers: -1 is the last Transformer layer, -2 the one below, ...; 0 ... L-1 count from
the first. Out-of-range indices are an error naming the valid range.

Output, one JSON object per input line; values rounded with round(x, 6) as the original:
- pooling "none" (the original's format): {"linex_index": i, "features": [{"token":
  "[CLS]", "layers": [{"index": -1, "values": [H floats]}, ...]}, ...]}, real tokens only.
- "cls": {"linex_index": i, "tokens": [...], "pooled": [{"index": -1, "values": [H]}, ...]},
  the [CLS] vector of each requested layer.
- "mean": the same with the mean over the real tokens (input_mask = 1, [CLS] and [SEP]
  included) of each requested layer.
- "concat_last_4": {"linex_index": i, "tokens": [...], "pooled": [[4H floats] per token]},
  token by token the concatenation of layers -1, -2, -3, -4 (in that order): the paper's
  best feature-based NER input (§5.3). Needs --layers to be the last four (the default).
- "sum_last_4": the same with the sum of the last four layers ([H] per token).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from absl import flags, logging

from keras_bert import cli, paths

# TensorFlow and the text layers are imported where used: --help starts without them.

POOLINGS = ("none", "cls", "mean", "concat_last_4", "sum_last_4")
LAST_4 = (-1, -2, -3, -4)
DEFAULT_SEQ_LENGTH = 128
_SEPARATOR = re.compile(r"(?:^|\s)\|\|\|(?:\s|$)")

FLAGS = flags.FLAGS

if TYPE_CHECKING:
    from keras_bert.models.encoder import BertEncoder
    from keras_bert.text.preprocessor import BertPreprocessor
    from keras_bert.text.tokenizer import BertTokenizer

# A text, or a pair (text_a, text_b); bytes are read as UTF-8.
Text = str | bytes | tuple[str | bytes, str | bytes]


# === Library ===


def extract_features(
    texts: Sequence[Text],
    encoder: BertEncoder,
    preprocessor: BertPreprocessor | BertTokenizer,
    layers: Sequence[int] = LAST_4,
    pooling: str = "none",
    seq_length: int | None = None,
    batch_size: int = 32,
) -> list[dict[str, Any]]:
    """The encoder's hidden states of each text (see `iter_features`), as a list."""
    return list(
        iter_features(texts, encoder, preprocessor, layers, pooling, seq_length, batch_size)
    )


def iter_features(
    texts: Sequence[Text],
    encoder: BertEncoder,
    preprocessor: BertPreprocessor | BertTokenizer,
    layers: Sequence[int] = LAST_4,
    pooling: str = "none",
    seq_length: int | None = None,
    batch_size: int = 32,
) -> Iterator[dict[str, Any]]:
    """Yields the features of each text, computed `batch_size` texts at a time.

    Args:
        texts: sequence of str (or bytes; invalid UTF-8 bytes are dropped, as the
            tokenizer does), or of (text_a, text_b) pairs.
        encoder: `keras_bert.BertEncoder`.
        preprocessor: `BertPreprocessor` (its seq_length and truncation apply), or a
            `BertTokenizer` (packed to `seq_length`, longest-first truncation).
        layers: sequence of int layer indices (-1 = last; 0 ... L-1 also accepted).
        pooling: one of `POOLINGS` (see the module docstring).
        seq_length: int or None. With a tokenizer: the packed length (None: 128); with a
            preprocessor: None or equal to its seq_length.
        batch_size: int, texts per encoder call.

    Yields:
        dict per text: "tokens" (list[str], the real tokens from [CLS] to the last [SEP])
        and, with pooling "none", "layers" ({index: float32 [T, H]}, keyed by the indices
        as given); "cls"/"mean": "pooled" ({index: float32 [H]}); "concat_last_4":
        "pooled" float32 [T, 4H]; "sum_last_4": "pooled" float32 [T, H].

    Raises:
        ValueError: bad layers, pooling, seq_length or batch_size.
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a sequence of texts, not one string.")
    preprocessor = _as_preprocessor(preprocessor, seq_length)
    layers = [int(i) for i in layers]
    positions = layer_positions(layers, encoder.config.num_hidden_layers, pooling)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    tokenizer = preprocessor.tokenizer
    for start in range(0, len(texts), batch_size):
        inputs = preprocessor(_segments(texts[start : start + batch_size]))
        # Keras' predict function: traced once per encoder, dropout off.
        outputs = encoder.predict_on_batch(inputs)["encoder_outputs"]
        states = np.stack([outputs[p] for p in positions]).astype(np.float32)  # (K, B, S, H)
        lengths = inputs["input_mask"].numpy().sum(axis=1)  # (B,)
        ids = inputs["input_word_ids"].numpy()
        for row, length in enumerate(lengths):
            tokens = [tokenizer.id_to_token(i) for i in ids[row, :length]]
            yield {"tokens": tokens, **_pool(states[:, row, :length], layers, positions, pooling)}


def layer_positions(layers: Sequence[int], num_layers: int, pooling: str = "none") -> list[int]:
    """The 0-based positions of `layers` (negative counts from the end) in a model of `num_layers`.

    Raises:
        ValueError: an index out of [-L, L-1], a layer given twice, no layers, or
            concat_last_4 / sum_last_4 with other layers than the last four.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}.")
    layers = [int(i) for i in layers]
    if not layers:
        raise ValueError("No layers requested.")
    bad = [i for i in layers if not -num_layers <= i < num_layers]
    if bad:
        raise ValueError(
            f"Layer indices {bad} are out of range: the encoder has {num_layers} layers, valid "
            f"indices are -{num_layers} ... {num_layers - 1} (-1 is the last)."
        )
    positions = [i % num_layers for i in layers]
    if len(set(positions)) != len(positions):
        raise ValueError(f"Layers {layers} name the same layer twice (of {num_layers}).")
    if pooling in ("concat_last_4", "sum_last_4"):
        if num_layers < 4:
            raise ValueError(f"pooling {pooling} needs 4 layers; the encoder has {num_layers}.")
        if set(positions) != {num_layers - 4, num_layers - 3, num_layers - 2, num_layers - 1}:
            raise ValueError(
                f"pooling {pooling} uses the last four layers {list(LAST_4)}; got layers {layers}."
            )
    return positions


def _pool(states, layers, positions, pooling):
    """One text's features from its requested layers' states [K, T, H] (K in the order of
    `layers`)."""
    if pooling == "none":
        return {"layers": dict(zip(layers, states))}
    if pooling == "cls":
        return {"pooled": dict(zip(layers, states[:, 0]))}
    if pooling == "mean":
        return {"pooled": dict(zip(layers, states.mean(axis=1)))}
    last_4 = states[
        np.argsort(positions)[::-1]
    ]  # (4, T, H): layers -1, -2, -3, -4 however they were given
    if pooling == "concat_last_4":
        return {"pooled": np.concatenate(last_4, axis=-1)}  # (T, 4H)
    return {"pooled": last_4.sum(axis=0)}  # (T, H)


def _as_preprocessor(preprocessor, seq_length):
    from keras_bert.text.preprocessor import BertPreprocessor
    from keras_bert.text.tokenizer import BertTokenizer

    if isinstance(preprocessor, BertTokenizer):
        return BertPreprocessor(preprocessor, seq_length=seq_length or DEFAULT_SEQ_LENGTH)
    if not isinstance(preprocessor, BertPreprocessor):
        raise TypeError(
            f"preprocessor must be a BertPreprocessor or BertTokenizer, got "
            f"{type(preprocessor).__name__}."
        )
    if seq_length is not None and seq_length != preprocessor.seq_length:
        raise ValueError(
            f"seq_length {seq_length} differs from the preprocessor's {preprocessor.seq_length}."
        )
    return preprocessor


def _segments(texts):
    """A batch of texts or pairs -> one string tensor [B], or two when the batch has pairs
    (a single text is then the pair (text, ""), which `BertPacker` packs as a single text)."""
    import tensorflow as tf

    pairs = [tuple(t) if isinstance(t, (tuple, list)) else (t, "") for t in texts]
    if any(len(p) != 2 for p in pairs):
        raise ValueError(
            f"A pair must be (text_a, text_b), got {next(p for p in pairs if len(p) != 2)!r}."
        )
    if any(isinstance(t, (tuple, list)) for t in texts):
        return tf.constant([a for a, _ in pairs], tf.string), tf.constant(
            [b for _, b in pairs], tf.string
        )
    return tf.constant(list(texts), tf.string)


# === Files ===


def read_examples(path: str) -> list[Text]:
    """The examples of an input file: str, or (text_a, text_b) for "a ||| b" lines.

    Raises:
        FileNotFoundError, ValueError: naming the file and line (see the module docstring).
    """
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"Input file not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # The newline ending the last line.
    examples = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise ValueError(
                f"{path}: line {number} is not valid UTF-8 ({e.reason} at byte {e.start} of the "
                f"line)."
            ) from None
        parts = _SEPARATOR.split(line)
        if len(parts) == 1:
            examples.append(line)
            continue
        if len(parts) > 2 or not parts[0].strip() or not parts[1].strip():
            raise ValueError(
                f"{path}: line {number} has a '|||' with an empty side or more than one '|||'; "
                f"write 'text_a ||| text_b' or a single text."
            )
        examples.append((parts[0].strip(), parts[1].strip()))
    return examples


def to_json_record(index: int, features: dict[str, Any], pooling: str = "none") -> dict[str, Any]:
    """One output line's object (see the module docstring) from `iter_features`' dict."""
    if pooling == "none":
        return {
            "linex_index": index,
            "features": [
                {
                    "token": token,
                    "layers": [
                        {"index": i, "values": _rounded(v[t])}
                        for i, v in features["layers"].items()
                    ],
                }
                for t, token in enumerate(features["tokens"])
            ],
        }
    pooled = features["pooled"]
    if isinstance(pooled, dict):
        pooled = [{"index": i, "values": _rounded(v)} for i, v in pooled.items()]
    else:
        pooled = [_rounded(v) for v in pooled]
    return {"linex_index": index, "tokens": features["tokens"], "pooled": pooled}


def _rounded(vector):
    return [round(float(x), 6) for x in vector]


def write_features(
    examples: Sequence[Text],
    output_file: str,
    encoder: BertEncoder,
    preprocessor: BertPreprocessor | BertTokenizer,
    layers: Sequence[int] = LAST_4,
    pooling: str = "none",
    batch_size: int = 32,
    log_every_seconds: float = 10.0,
) -> int:
    """Writes one JSON line per example to `output_file` (local or gs://), atomically.

    The lines go to a temporary file renamed at the end, so a reader never sees a partial
    output; progress is logged every `log_every_seconds`. Returns the number of lines.
    """
    import tensorflow as tf

    tmp = f"{output_file}.tmp-{os.getpid()}"
    started = last_log = time.monotonic()
    count = 0
    try:
        with tf.io.gfile.GFile(tmp, "w") as f:
            for count, features in enumerate(
                iter_features(
                    examples, encoder, preprocessor, layers, pooling, batch_size=batch_size
                ),
                start=1,
            ):
                f.write(json.dumps(to_json_record(count - 1, features, pooling)) + "\n")
                if time.monotonic() - last_log >= log_every_seconds:
                    last_log = time.monotonic()
                    logging.info(
                        "%d / %d lines (%.1f lines/s)",
                        count,
                        len(examples),
                        count / (last_log - started),
                    )
        tf.io.gfile.rename(tmp, output_file, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
    logging.info("Wrote %d lines to %s in %.1f s.", count, output_file, time.monotonic() - started)
    return count


# === Command line ===


def define_flags():
    """Define the flags (again on each call: another command line may have defined the same
    names)."""
    cli.define(
        flags.DEFINE_string,
        "input_file",
        None,
        "Text, one example per line; 'text_a ||| text_b' pairs.",
    )
    cli.define(flags.DEFINE_string, "output_file", None, "JSON lines, one per input line.")
    cli.define(
        flags.DEFINE_string,
        "init_checkpoint",
        None,
        "Google checkpoint, Hugging Face directory or pre-training run directory.",
    )
    cli.define(
        flags.DEFINE_string,
        "vocab_file",
        None,
        "vocab.txt (default: the one beside the checkpoint).",
    )
    cli.define(
        flags.DEFINE_bool,
        "lower_case",
        None,
        "Uncased tokenization (default: from the checkpoint).",
    )
    cli.define(
        flags.DEFINE_list,
        "layers",
        [str(i) for i in LAST_4],
        "Layer indices; -1 is the last layer.",
    )
    cli.define(
        flags.DEFINE_enum,
        "pooling",
        "none",
        POOLINGS,
        "none (every token), cls, mean, concat_last_4, sum_last_4.",
    )
    cli.define(
        flags.DEFINE_integer,
        "max_seq_length",
        DEFAULT_SEQ_LENGTH,
        "Tokens per input, longer ones truncated.",
    )
    cli.define(flags.DEFINE_integer, "batch_size", 32, "Inputs per encoder call.")


def main(argv):
    del argv
    try:
        layers = [int(i) for i in FLAGS.layers]
    except ValueError:
        raise cli.UsageError(
            f"--layers must be comma-separated integers, got {','.join(FLAGS.layers)}."
        ) from None
    paths.require_path("input_file", FLAGS.input_file, "a text file, one example per line")
    paths.require_path("init_checkpoint", FLAGS.init_checkpoint, paths.INIT_CHECKPOINT_KINDS)
    paths.require_path("vocab_file", FLAGS.vocab_file, "a vocab.txt, or a directory holding one")
    from keras_bert.checkpoints import load_init_checkpoint  # TensorFlow, Keras.
    from keras_bert.text.preprocessor import BertPreprocessor
    from keras_bert.text.tokenizer import BertTokenizer

    examples = read_examples(FLAGS.input_file)
    empty = sum(1 for e in examples if e == "")
    if empty:
        logging.warning(
            "%d empty lines in %s: their lines hold the features of [CLS] [SEP].",
            empty,
            FLAGS.input_file,
        )
    init = load_init_checkpoint(
        FLAGS.init_checkpoint, vocab_file=FLAGS.vocab_file, lower_case=FLAGS.lower_case
    )
    limit = init.encoder.config.max_position_embeddings
    if not 2 <= FLAGS.max_seq_length <= limit:
        raise cli.UsageError(
            f"--max_seq_length {FLAGS.max_seq_length} must be in [2, {limit}] "
            f"(max_position_embeddings of {FLAGS.init_checkpoint})."
        )
    layer_positions(
        layers, init.encoder.config.num_hidden_layers, FLAGS.pooling
    )  # Errors before any work.
    preprocessor = BertPreprocessor(
        BertTokenizer(init.vocabulary, lower_case=init.lower_case), seq_length=FLAGS.max_seq_length
    )
    logging.info("Extracting features of %d lines of %s.", len(examples), FLAGS.input_file)
    write_features(
        examples,
        FLAGS.output_file,
        init.encoder,
        preprocessor,
        layers,
        FLAGS.pooling,
        FLAGS.batch_size,
    )


def console_main():
    """Entry point (`python -m keras_bert.tasks.extract_features`,
    `keras-bert-extract-features`)."""
    cli.run_command(__doc__, define_flags, ["input_file", "output_file", "init_checkpoint"], main)


if __name__ == "__main__":
    console_main()
