"""`DistillConfig`: the settings of a distillation run (light: the command line,
`keras_bert.tasks.distill`, defines its flags from it)."""

import dataclasses

from keras_bert import paths
from keras_bert.tasks.config import FinetuneConfig


@dataclasses.dataclass
class DistillConfig(FinetuneConfig):
    """Settings of a distillation run: `FinetuneConfig`'s (data, recipe, strategy, outputs; the
    command-line flags have the same names) and the teacher, the student and the losses.

    The task, the vocabulary, the casing and (by default) seq_length are the teacher's: task
    defaults to the teacher's task.json and must equal it when given; init_checkpoint, model,
    vocab_file, lower_case and lora_rank are not used (the student's are below).

    Args:
        teacher: str. A fine-tuned task model directory (`model/`) or the fine-tuning run
            directory holding it.
        student_layers: int or None. Keep this many of the teacher's layers, evenly spaced,
            with its embeddings and head (`keras_bert.tasks.distillation.students`).
        student_layer_ids: str or None. The teacher's layers to keep instead of evenly spaced
            ones: 0-based, comma-separated, increasing ("1,3,5"; a list of ints is taken too).
            student_layers, if given as well, must be their number.
        student_preset: str or None. A `BertConfig` preset instead ("L-4_H-256", "mini"...).
        student_init_checkpoint: str or None. The preset student's starting weights (anything
            init_checkpoint takes; its vocabulary must be the teacher's); default random.
        temperature: float. Softmax temperature T of the soft targets (their loss is scaled
            by T^2).
        alpha: float in [0, 1]. The loss is alpha * gold-label loss + (1 - alpha) *
            (soft-target loss + hidden_weight * hidden-state loss + attention_weight *
            attention loss), as `keras.distillation.Distiller`'s student_loss_weight; rows
            without gold labels (unlabeled_file) add to the teacher's terms only. alpha=1
            trains on the gold labels alone (no teacher).
        hidden_weight: float. Weight of TinyBERT's hidden-state matching (0: off).
        attention_weight: float. Weight of TinyBERT's attention-score matching (0: off).
        unlabeled_file: str or None. More training inputs in the task's prediction-file format
            (GLUE: its test.tsv layout; SQuAD: a JSON file; CoNLL-2003: a CoNLL file; SWAG:
            a CSV), labelled by the teacher only.
    """

    teacher: str | None = None
    student_layers: int | None = None
    student_layer_ids: str | None = None
    student_preset: str | None = None
    student_init_checkpoint: str | None = None
    temperature: float = 2.0
    alpha: float = 0.5
    hidden_weight: float = 0.0
    attention_weight: float = 0.0
    unlabeled_file: str | None = None

    def __post_init__(self) -> None:
        from keras_bert.checkpoints.task_model import read_task_info, require_task_model

        if not self.teacher:
            raise ValueError("teacher is required: a fine-tuned model/ directory.")
        info = read_task_info(require_task_model(self.teacher, "teacher"))
        if self.task is not None and self.task != info.get("task"):
            raise ValueError(
                f"task {self.task!r} differs from the teacher's task {info.get('task')!r}; "
                f"leave task unset to use the teacher's."
            )
        self.task = info.get("task")
        if self.seq_length is None:
            self.seq_length = int(info["seq_length"])
        self.lower_case = bool(info["lower_case"])
        super().__post_init__()
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}.")
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}.")
        if self.hidden_weight < 0 or self.attention_weight < 0:
            raise ValueError("hidden_weight and attention_weight must be >= 0.")

    def _check_model_source(self) -> None:
        """Exactly one student: student_layers >= 1 and/or student_layer_ids, or student_preset
        (or a student_init_checkpoint); no fine-tuning model settings."""
        given = [
            name
            for name in ("init_checkpoint", "model", "vocab_file", "lora_rank")
            if getattr(self, name) is not None
        ]
        if given:
            raise ValueError(
                f"Distillation does not take {', '.join(given)}: the vocabulary is the teacher's "
                f"and the student is student_layers or student_preset / student_init_checkpoint."
            )
        if self.quantization_aware:
            raise ValueError("Distillation does not take quantization_aware (fine-tuning only).")
        preset = self.student_preset or self.student_init_checkpoint
        layers = self.student_layers is not None or self.student_layer_ids is not None
        if layers == bool(preset):
            raise ValueError(
                "Pass one student: student_layers (N of the teacher's layers) or "
                "student_layer_ids (which ones), or student_preset (e.g. L-4_H-256, optionally "
                "with student_init_checkpoint)."
            )
        if self.student_layers is not None and self.student_layers < 1:
            raise ValueError(f"student_layers must be >= 1, got {self.student_layers}.")
        if self.student_layer_ids is not None:
            self._check_layer_ids()

    def _check_layer_ids(self) -> None:
        """student_layer_ids as "1,3,5" (`students.layer_ids`), as many as student_layers."""
        from keras_bert.tasks.distillation.students import layer_ids

        ids = layer_ids(self.student_layer_ids)
        self.student_layer_ids = ",".join(str(i) for i in ids)
        if self.student_layers is not None and self.student_layers != len(ids):
            raise ValueError(
                f"student_layers={self.student_layers} but student_layer_ids names {len(ids)} "
                f"layers ({self.student_layer_ids}): give one of them, or agreeing ones."
            )

    def check_paths(self) -> None:
        """Raises if a local input path does not exist (teacher, student_init_checkpoint,
        unlabeled_file, data_dir)."""
        super().check_paths()
        paths.require_path("teacher", self.teacher, "a fine-tuned model/ directory", directory=True)
        paths.require_path(
            "student_init_checkpoint", self.student_init_checkpoint, paths.INIT_CHECKPOINT_KINDS
        )
        paths.require_path("unlabeled_file", self.unlabeled_file, "a file of the task's inputs")
