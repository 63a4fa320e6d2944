"""Command line: pre-train BERT on TFRecords (flags are `PretrainingConfig` field names).

Example (a tiny model on a laptop; the same command with --strategy tpu --tpu local and
gs:// paths runs on a TPU VM):

    python -m keras_bert.pretraining.pretrain --model tiny --vocab_size 30522 \\
        --train_files 'data/train-*.tfrecord' --eval_files 'data/eval-*.tfrecord' \\
        --batch_size 32 --num_train_steps 1000 --num_warmup_steps 100 --learning_rate 1e-4 \\
        --model_dir runs/tiny

Running the same command again resumes from the newest checkpoint in --model_dir.
"""

import dataclasses
import json

from absl import flags

from keras_bert import cli
from keras_bert.pretraining.config import PretrainingConfig
from keras_bert.training.choices import OPTIMIZERS, PRECISIONS, STRATEGIES

_D = PretrainingConfig.__dataclass_fields__
FLAGS = flags.FLAGS


def _default(name):
    return _D[name].default


def define_flags():
    """Define the flags (again on each call: another command line may have defined the same names)."""
    cli.define(flags.DEFINE_string, "model", _default("model"), "BertConfig preset: tiny mini small medium base large, L-x_H-y.")
    cli.define(flags.DEFINE_string, "bert_config_file", None, "An original bert_config.json (overrides --model).")
    cli.define(flags.DEFINE_integer, "vocab_size", None, "Vocabulary size replacing the preset's.")
    cli.define(flags.DEFINE_string, "train_files", None, "Comma-separated TFRecord file patterns (local or gs://).")
    cli.define(flags.DEFINE_string, "eval_files", None, "Held-out TFRecords for the final MLM/NSP accuracy.")
    cli.define(flags.DEFINE_string, "model_dir", None, "Run directory: checkpoints, TensorBoard logs, plot, summary.")
    cli.define(flags.DEFINE_string, "init_checkpoint", None, "Google TF1 checkpoint, Hugging Face directory or another run's model_dir to start from.")
    cli.define(flags.DEFINE_string, "vocab_file", None, "The data's vocabulary, copied into --model_dir as vocab.txt.")
    cli.define(flags.DEFINE_bool, "lower_case", None, "The data's casing (--lower_case: uncased), kept in --model_dir.")
    cli.define(flags.DEFINE_string, "tpu", None, "TPU name or address for --strategy tpu ('local' on a TPU VM).")
    for name in ("batch_size", "seq_length", "max_predictions_per_seq", "num_train_steps", "num_warmup_steps",
                 "grad_accumulation_steps", "steps_per_execution", "checkpoint_every", "keep_checkpoints",
                 "seed", "shuffle_buffer"):
        cli.define(flags.DEFINE_integer, name, _default(name), f"PretrainingConfig.{name}.")
    for name in ("steps_per_loop", "eval_batch_size", "max_eval_steps"):
        cli.define(flags.DEFINE_integer, name, None, f"PretrainingConfig.{name} (default: automatic).")
    for name in ("learning_rate", "weight_decay", "clip_norm"):
        cli.define(flags.DEFINE_float, name, _default(name), f"PretrainingConfig.{name}.")
    for name in ("jit_compile", "next_sentence", "deterministic", "verbose", "plot"):
        cli.define(flags.DEFINE_bool, name, _default(name), f"PretrainingConfig.{name}.")
    cli.define(flags.DEFINE_enum, "optimizer", _default("optimizer"), OPTIMIZERS, "Optimizer.")
    cli.define(flags.DEFINE_enum, "strategy", _default("strategy"), STRATEGIES, "tf.distribute strategy.")
    cli.define(flags.DEFINE_enum, "mixed_precision", _default("mixed_precision"), PRECISIONS, "Precision policy.")


def config_from_flags():
    """A `PretrainingConfig` from the parsed flags (flag name = field name)."""
    names = [f.name for f in dataclasses.fields(PretrainingConfig) if f.name in FLAGS]
    return PretrainingConfig(**{name: FLAGS[name].value for name in names})


def main(argv):
    del argv
    config = config_from_flags()  # Settings and paths are checked before TensorFlow loads.
    config.check_paths()
    from keras_bert.pretraining.runner import run_pretraining

    summary = run_pretraining(config)
    summary = {k: v for k, v in summary.items() if k not in ("model", "history")}
    print(json.dumps(summary, indent=1))


def console_main():
    """Entry point (`python -m keras_bert.pretraining.pretrain`, `keras-bert-pretrain`)."""
    cli.run_command(__doc__, define_flags, ["train_files", "model_dir"], main)


if __name__ == "__main__":
    console_main()
