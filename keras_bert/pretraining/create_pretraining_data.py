"""Command line: corpus -> static pre-training TFRecords (the original
`create_pretraining_data.py`).

    python -m keras_bert.pretraining.create_pretraining_data --input_file=corpus/*.txt \\
        --output_dir=data/seq128 --vocab_file=vocab.txt --max_seq_length=128 --num_shards=16

`--pack` writes packed rows (several instances per row; `keras_bert.pretraining.packing`).
`--objective=mlm` writes RoBERTa's full-sentence rows (`keras_bert.pretraining.full_sentences`)
for `keras-bert-pretrain --objective=mlm`.

The library is `keras_bert.pretraining.static_records` (`create_pretraining_data`, `ExampleFactory`,
also importable from here); its docstring describes the chunks, helpers and record format.
"""

import os

from absl import flags

from keras_bert import _lazy, cli, paths
from keras_bert.pretraining.corpus import FORMATS

# The library's names, importable from here as before (loaded on first use: --help stays light).
_LIBRARY_NAMES = ("ExampleFactory", "create_pretraining_data")
__all__ = [*_LIBRARY_NAMES, "console_main", "define_flags", "main"]


__getattr__, __dir__ = _lazy.attach(
    __name__, {name: f"keras_bert.pretraining.static_records:{name}" for name in _LIBRARY_NAMES}
)


def define_flags():
    """Define the flags (again on each call: another command line may have defined the same
    names)."""
    cli.define(
        flags.DEFINE_string, "input_file", None, "Comma-separated input files / glob patterns."
    )
    cli.define(
        flags.DEFINE_string,
        "tfds_name",
        None,
        "A tensorflow-datasets corpus (e.g. wikipedia/20230601.en) used instead of --input_file.",
    )
    cli.define(flags.DEFINE_string, "tfds_split", "train", "Split of --tfds_name.")
    cli.define(flags.DEFINE_string, "tfds_field", "text", "Text field of --tfds_name.")
    cli.define(flags.DEFINE_string, "output_dir", None, "Output directory.")
    cli.define(flags.DEFINE_string, "vocab_file", None, "WordPiece vocab.txt.")
    cli.define(
        flags.DEFINE_bool, "lower_case", True, "Uncased tokenization; must match the vocabulary."
    )
    cli.define(flags.DEFINE_enum, "file_format", "sentences", list(FORMATS), "Input file format.")
    cli.define(flags.DEFINE_integer, "max_seq_length", 128, "Maximum sequence length.")
    cli.define(
        flags.DEFINE_integer,
        "max_predictions_per_seq",
        20,
        "Maximum masked LM predictions per sequence.",
    )
    cli.define(flags.DEFINE_float, "masked_lm_prob", 0.15, "Masked LM probability.")
    cli.define(flags.DEFINE_float, "short_seq_prob", 0.1, "Probability of a shorter target length.")
    cli.define(flags.DEFINE_integer, "dupe_factor", 10, "Passes over the corpus (different masks).")
    cli.define(flags.DEFINE_bool, "whole_word_masking", False, "Mask whole words.")
    cli.define(flags.DEFINE_integer, "num_shards", 1, "Output files.")
    cli.define(flags.DEFINE_integer, "num_workers", os.cpu_count() or 1, "Worker processes.")
    cli.define(flags.DEFINE_integer, "seed", 12345, "Random seed.")
    cli.define(
        flags.DEFINE_integer, "documents_per_chunk", 1000, "Documents per chunk (random next pool)."
    )
    cli.define(flags.DEFINE_string, "output_prefix", "pretraining", "Output file name prefix.")
    cli.define(
        flags.DEFINE_bool,
        "pack",
        False,
        "Pack several instances per row (first-fit-decreasing, no cross-attention); read with "
        "max_instances (keras_bert.pretraining.packing documents the extra features).",
    )
    cli.define(flags.DEFINE_integer, "max_instances", 4, "Most instances per packed row.")
    cli.define(
        flags.DEFINE_enum,
        "objective",
        "mlm_nsp",
        ["mlm_nsp", "mlm_sop", "mlm"],
        "Sentence pairs for next sentence prediction (random next segments, the original), "
        "ALBERT's sentence order prediction (segments swapped, label 1), or RoBERTa's "
        "full-sentence rows for masked LM only (sentences contiguous across documents, [SEP] "
        "between documents, one segment; not with --pack: the rows are already full).",
    )
    return flags.FLAGS


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    if bool(FLAGS.input_file) == bool(FLAGS.tfds_name):
        raise cli.UsageError("give exactly one of --input_file and --tfds_name.")
    paths.require_path("vocab_file", FLAGS.vocab_file, "a WordPiece vocab.txt, one token per line")
    from keras_bert.pretraining import corpus, static_records  # TensorFlow.

    documents = None
    if FLAGS.tfds_name:
        documents = corpus.tfds_documents(FLAGS.tfds_name, FLAGS.tfds_split, FLAGS.tfds_field)
    files = static_records.create_pretraining_data(
        FLAGS.input_file,
        FLAGS.output_dir,
        FLAGS.vocab_file,
        lower_case=FLAGS.lower_case,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        short_seq_prob=FLAGS.short_seq_prob,
        dupe_factor=FLAGS.dupe_factor,
        whole_word_masking=FLAGS.whole_word_masking,
        num_shards=FLAGS.num_shards,
        num_workers=FLAGS.num_workers,
        seed=FLAGS.seed,
        file_format=FLAGS.file_format,
        documents=documents,
        output_prefix=FLAGS.output_prefix,
        documents_per_chunk=FLAGS.documents_per_chunk,
        progress=True,
        pack=FLAGS.pack,
        max_instances=FLAGS.max_instances,
        objective=FLAGS.objective,
    )
    print("\n".join(files))


def console_main():
    """Entry point (`python -m keras_bert.pretraining.create_pretraining_data`,
    `keras-bert-create-pretraining-data`)."""
    cli.run_command(__doc__, define_flags, ["output_dir", "vocab_file"], main)


if __name__ == "__main__":
    console_main()
