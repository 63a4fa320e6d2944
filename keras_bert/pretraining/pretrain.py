"""Command line: pre-train BERT on TFRecords (flags are `PretrainingConfig` field names).

Example (a tiny model on a laptop; the same command with --strategy tpu --tpu local and
gs:// paths runs on a TPU VM):

    python -m keras_bert.pretraining.pretrain --model tiny --vocab_size 30522 \\
        --train_files 'data/train-*.tfrecord' --eval_files 'data/eval-*.tfrecord' \\
        --batch_size 32 --num_train_steps 1000 --num_warmup_steps 100 --learning_rate 1e-4 \\
        --model_dir runs/tiny

Running the same command again resumes from the newest checkpoint in --model_dir.

On JAX (a TPU VM or Colab's TPU runtime, several GPUs): the same command with
`KERAS_BACKEND=jax` and `--distribution=data_parallel` (or `auto`; `model_parallel` splits the
encoder's kernels over `--model_parallel_devices`) instead of `--strategy`; the same data,
outputs and checkpoints (written in a backend-neutral format, `checkpoint.json` and
`ckpt-<step>/`).
"""

import json

from absl import flags

from keras_bert import cli
from keras_bert.pretraining.config import PretrainingConfig
from keras_bert.training import settings

FLAGS = flags.FLAGS
# The --help lines of PretrainingConfig's own fields (and those it says otherwise than
# TrainingSettings).
_FLAG_HELP = {
    "model": "BertConfig preset: tiny mini small medium base large, L-x_H-y.",
    "bert_config_file": "An original bert_config.json (overrides --model).",
    "vocab_size": "Vocabulary size replacing the preset's.",
    "train_files": "Comma-separated TFRecord file patterns (local or gs://).",
    "eval_files": "Held-out TFRecords for the final MLM/NSP accuracy.",
    "vocab_file": "The data's vocabulary, copied into --model_dir as vocab.txt.",
    "lower_case": "The data's casing (--lower_case: uncased), kept in --model_dir.",
    "batch_size": "Global batch size of one update step (all replicas, all micro-batches).",
    "seq_length": "max_seq_length of the records.",
    "objective": (
        "mlm_nsp (masked LM + next sentence), mlm (RoBERTa; full-sentence rows from "
        "keras-bert-create-pretraining-data --objective=mlm), mlm_sop (ALBERT's sentence order, "
        "on records made with --objective=mlm_sop), electra (replaced-token detection)."
    ),
    "generator_size": "ELECTRA generator width as a fraction of the encoder's (hidden, heads).",
}


def define_flags():
    """Define the flags (again on each call: another command line may have defined the same
    names)."""
    settings.define_flags(PretrainingConfig, _FLAG_HELP)


def config_from_flags():
    """A `PretrainingConfig` from the parsed flags (flag name = field name)."""
    return PretrainingConfig(**settings.flag_values(PretrainingConfig))


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
