"""Command line: build a WordPiece vocab.txt from text files.

    python -m keras_bert.text.build_vocab --input='corpus/*.txt' --vocab_size=30000 \\
        --lower_case=true --output=vocab.txt
"""

from absl import flags, logging

from keras_bert import cli
from keras_bert.text.vocab import SPECIAL_TOKENS, write_vocabulary

FLAGS = flags.FLAGS


def define_flags():
    """Define the flags (again on each call: another command line may use the same names)."""
    cli.define(
        flags.DEFINE_list,
        "input",
        None,
        "Text files or glob patterns (local or gs://), comma-separated; one passage per line.",
    )
    cli.define(
        flags.DEFINE_integer,
        "vocab_size",
        30000,
        "Maximum vocabulary size, reserved tokens included.",
    )
    cli.define(
        flags.DEFINE_boolean,
        "lower_case",
        True,
        "Uncased vocabulary (lower-case + accent stripping); must match the tokenizer.",
    )
    cli.define(
        flags.DEFINE_list,
        "reserved_tokens",
        list(SPECIAL_TOKENS),
        "Tokens placed first, in this order.",
    )
    cli.define(
        flags.DEFINE_integer,
        "max_unique_chars",
        1000,
        "Alphabet limit: the most frequent characters kept.",
    )
    cli.define(flags.DEFINE_string, "output", None, "Path of the vocab.txt to write (atomically).")


def main(argv):
    if len(argv) > 1:
        raise cli.UsageError(f"unexpected arguments: {argv[1:]}")
    from keras_bert.text import vocab_builder  # TensorFlow and tensorflow-text.

    tokens = vocab_builder.build_vocabulary(
        FLAGS.input,
        FLAGS.vocab_size,
        lower_case=FLAGS.lower_case,
        reserved_tokens=FLAGS.reserved_tokens,
        max_unique_chars=FLAGS.max_unique_chars,
    )
    write_vocabulary(tokens, FLAGS.output)
    logging.info("Wrote %d tokens to %s.", len(tokens), FLAGS.output)


def console_main():
    """Entry point (`python -m keras_bert.text.build_vocab`, `keras-bert-build-vocab`)."""
    cli.run_command(__doc__, define_flags, ["input", "output"], main)


if __name__ == "__main__":
    console_main()
