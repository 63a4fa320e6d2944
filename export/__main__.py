"""Command line: export a fine-tuned model or a pre-trained encoder for TF Serving, TF Hub or
TFLite.

    python -m keras_bert.export --model_dir=runs/mrpc/model --export_dir=serving/mrpc \\
        [--version=N] [--format=saved_model|hub|tflite] [--quantize=...] [--seq_length=...]
        [--nowarmup_requests] [--warmup_texts=FILE] [--tune_batching] [--text_pair]

Each export is a new integer version directory in --export_dir (never overwritten).
"""

import json
import os

from absl import flags

from keras_bert import cli


def define_flags():
    from keras_bert.export import FORMATS, QUANTIZATIONS

    cli.define(
        flags.DEFINE_string,
        "model_dir",
        None,
        "A fine-tuned model/ directory (model.keras, task.json, vocab.txt) or its run directory, "
        "a fine-tuned Hugging Face directory (BertForSequenceClassification, "
        "...TokenClassification, ...QuestionAnswering, ...MultipleChoice), or a pre-trained "
        "encoder: Google checkpoint, Hugging Face directory, pre-training run directory.",
    )
    cli.define(
        flags.DEFINE_string,
        "export_dir",
        None,
        "Base directory; each export is a new integer version in it.",
    )
    cli.define(
        flags.DEFINE_integer,
        "version",
        None,
        "Version to write (default: the next one); never overwritten.",
    )
    cli.define(
        flags.DEFINE_enum,
        "format",
        "saved_model",
        list(FORMATS),
        "; ".join(f"{name}: {text}" for name, (_, text, _) in FORMATS.items()) + ".",
    )
    cli.define(
        flags.DEFINE_enum,
        "quantize",
        "none",
        list(QUANTIZATIONS),
        "TFLite quantization: "
        + "; ".join(f"{name}: {text}" for name, (_, text) in QUANTIZATIONS.items())
        + ". saved_model takes none or int8: int8 weights per channel and int8 activations per "
        "row (at run time) in the encoder's matrix multiplies (oneDNN), the rest float32.",
    )
    cli.define(
        flags.DEFINE_integer,
        "seq_length",
        None,
        "Longest packed sequence; longer texts are truncated (default: the training length, 128 "
        "for encoders).",
    )
    cli.define(
        flags.DEFINE_string,
        "representative_texts",
        None,
        "For --quantize=int8 and the integer-only ones: a file of calibration texts, one row per "
        "line (a row's texts tab-separated, in the order of the model's text inputs). Default: "
        "the sample of training texts the fine-tuning run recorded in model/.",
    )
    cli.define(
        flags.DEFINE_boolean,
        "text_pair",
        None,
        "A sequence classifier's signatures take sentence pairs (text, text_b). For Hugging Face "
        "directories fine-tuned on pairs: nothing in them says so unless config.json's "
        "finetuning_task is a GLUE pair task. Default: as the model says, else single texts "
        "(with a notice for a Hugging Face classifier). --notext_pair: single texts.",
    )
    _define_saved_model_flags()


def _define_saved_model_flags():
    """The flags only --format=saved_model reads: warmup records and batching."""
    cli.define(
        flags.DEFINE_boolean,
        "warmup_requests",
        True,
        "SavedModel: write assets.extra/tf_serving_warmup_requests (TF Serving replays them at "
        "load: every padded length, every batch size).",
    )
    cli.define(
        flags.DEFINE_string,
        "warmup_texts",
        None,
        "SavedModel: real texts for the warmup requests and --tune_batching, one row per line "
        "(pairs tab-separated).",
    )
    cli.define(
        flags.DEFINE_boolean,
        "tune_batching",
        False,
        "SavedModel: measure TF Serving's batching settings here (about a minute) and write "
        "assets.extra/batching_parameters.txt for --enable_batching.",
    )


def main(argv):
    del argv
    from keras_bert.export import export

    FLAGS = flags.FLAGS
    path = export(
        FLAGS.model_dir,
        FLAGS.export_dir,
        format=FLAGS.format,
        version=FLAGS.version,
        seq_length=FLAGS.seq_length,
        quantize=FLAGS.quantize,
        representative_texts=FLAGS.representative_texts,
        warmup_requests=FLAGS.warmup_requests,
        warmup_texts=FLAGS.warmup_texts,
        tune_batching=FLAGS.tune_batching,
        text_pair=FLAGS.text_pair,
    )
    print(path)
    if FLAGS.format == "tflite" and FLAGS.quantize.startswith("int8"):
        from keras_bert.export import quantization_report

        print(f"quantize={FLAGS.quantize}:\n{quantization_report.describe_export(path)}")
    elif FLAGS.format == "saved_model" and FLAGS.quantize != "none":
        from keras_bert.export.saved_model import EXTRA_DIR

        with open(os.path.join(path, EXTRA_DIR, "task.json")) as f:
            print(f"quantize={FLAGS.quantize}: {json.load(f)['quantization']['description']}")


def console_main():
    """Entry point (`python -m keras_bert.export`, `keras-bert-export`)."""
    cli.run_command(__doc__, define_flags, ["model_dir", "export_dir"], main)


if __name__ == "__main__":
    console_main()
