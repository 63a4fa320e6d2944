"""Command line: distill a fine-tuned task model (the teacher) into a smaller student.

    python -m keras_bert.tasks.distill --teacher=runs/mrpc/model --student_layers=3 \\
        --data_dir=glue/MRPC --model_dir=runs/mrpc-student --do_train --do_eval

The teacher is the `model/` directory of a fine-tuning run (classification, regression, SQuAD,
CoNLL-2003, SWAG; its task, vocabulary, casing and sequence length are used). The student is
`--student_layers=N` (N of the teacher's layers, evenly spaced, with its embeddings and head,
as DistilBERT; `--student_layer_ids=1,3,5` names them instead) or
`--student_preset=L-4_H-256` (random, or `--student_init_checkpoint`'s weights). The loss is
`--alpha` x the gold-label loss + (1 - alpha) x (the teacher's soft targets at `--temperature`,
scaled by T^2 + `--hidden_weight` x hidden-state matching + `--attention_weight` x attention
matching, as TinyBERT). `--unlabeled_file` adds inputs only the
teacher labels. Everything else is the fine-tuning runner's (`keras_bert.tasks.finetune`: the
same flags for data, recipe, strategy and outputs): `--model_dir` receives checkpoints (a killed
run resumes), `eval_results.json` (the student's metrics, and the teacher's under "teacher"),
`predictions/`, `model/` (for `keras_bert.export` as any fine-tuned model), TensorBoard logs,
`training_curve.png` and `summary.json`.

The runner is `keras_bert.tasks.distillation.runner.run_distillation` (also importable from
here), its settings a `DistillConfig` (flag name = field name).
"""

from absl import flags

from keras_bert import _lazy, cli, paths
from keras_bert.tasks import finetune
from keras_bert.tasks.config import check_input_paths
from keras_bert.tasks.distillation.config import DistillConfig

# The runner's name, importable from here (loaded on first use: --help stays light).
_RUNNER_NAMES = ("run_distillation",)
__all__ = ["DistillConfig", *_RUNNER_NAMES, "console_main", "define_flags", "main"]

__getattr__, __dir__ = _lazy.attach(
    __name__, {name: f"keras_bert.tasks.distillation.runner:{name}" for name in _RUNNER_NAMES}
)

_FLAG_HELP = {
    "task": "Task name (default: the teacher's; must equal it).",
    "seq_length": "Tokens per sequence (default: the teacher's).",
    "teacher": "The fine-tuned model/ directory to distill (or its run directory).",
    "student_layers": "Student of N of the teacher's layers, evenly spaced (DistilBERT's init).",
    "student_layer_ids": "The teacher's layers the student keeps instead, 0-based: e.g. 1,3,5.",
    "student_preset": "Student of a BertConfig preset instead, e.g. L-4_H-256.",
    "student_init_checkpoint": "The preset student's starting weights (default random).",
    "temperature": "Softmax temperature of the soft targets (loss scaled by T^2).",
    "alpha": "Weight of the gold-label loss; the teacher's terms get 1 - alpha.",
    "hidden_weight": "Weight of hidden-state matching (TinyBERT; 0: off).",
    "attention_weight": "Weight of attention-score matching (TinyBERT; 0: off).",
    "unlabeled_file": "More inputs, in the task's prediction-file format, labelled by the teacher.",
}


def define_flags():
    """`DistillConfig`'s flags and the task options (`finetune.define_flags`)."""
    finetune.define_flags(DistillConfig, _FLAG_HELP)


def main(argv):
    del argv
    FLAGS = flags.FLAGS  # Paths are checked before TensorFlow loads.
    paths.require_path("teacher", FLAGS.teacher, "a fine-tuned model/ directory", directory=True)
    paths.require_path(
        "student_init_checkpoint", FLAGS.student_init_checkpoint, paths.INIT_CHECKPOINT_KINDS
    )
    paths.require_path("unlabeled_file", FLAGS.unlabeled_file, "a file of the task's inputs")
    check_input_paths(None, None, FLAGS.data_dir, FLAGS.tfds)
    config = finetune.config_from_flags(DistillConfig)
    from keras_bert.tasks.distillation.runner import run_distillation

    finetune.print_summary(run_distillation(config))


def console_main():
    """Entry point (`python -m keras_bert.tasks.distill`, `keras-bert-distill`)."""
    cli.run_command(__doc__, define_flags, ["teacher", "model_dir"], main)


if __name__ == "__main__":
    console_main()
