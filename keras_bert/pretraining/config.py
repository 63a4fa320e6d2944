"""`PretrainingConfig`: the settings of a pre-training run (light: the command line,
`keras_bert.pretraining.pretrain`, defines its flags from it without importing TensorFlow; the
runner is `keras_bert.pretraining.runner`)."""

import dataclasses
import math
import typing

from keras_bert import paths
from keras_bert.training.choices import OBJECTIVES
from keras_bert.training.settings import TrainingSettings

if typing.TYPE_CHECKING:
    from keras_bert.config import BertConfig


@dataclasses.dataclass
class PretrainingConfig(TrainingSettings):
    """Settings of a pre-training run (the command-line flags have the same names).

    The fields every run has (model_dir, init_checkpoint, vocab_file, lower_case, batch_size,
    eval_batch_size, seq_length, learning_rate, optimizer, weight_decay, clip_norm, strategy,
    tpu, mixed_precision, jit_compile, steps_per_loop, checkpoint_every, keep_checkpoints, seed,
    verbose, plot) are `keras_bert.training.settings.TrainingSettings`'s; here:

    Args:
        model: str. A `BertConfig` preset name (default "base").
        bert_config_file: str or None. An original `bert_config.json` (overrides `model`).
        bert_config: `BertConfig` or None (Python API; overrides both above).
        vocab_size: int or None. Replaces the preset's vocabulary size.
        train_files: str. Comma-separated TFRecord file patterns (local or gs://).
        eval_files: str or None. Held-out TFRecords for the final MLM/NSP accuracy.
        batch_size: int. GLOBAL batch size of one update step (all replicas, all micro-batches).
        seq_length: int. max_seq_length of the records.
        max_predictions_per_seq: int. Masked positions per record.
        num_train_steps: int. Update steps.
        num_warmup_steps: int. Linear-warmup update steps.
        grad_accumulation_steps: int. Micro-batches of batch_size / this per update.
        steps_per_execution: int. Micro-steps run per `tf.function` call.
        steps_per_loop: int or None. Update steps per logging loop (default: the largest
            divisor of num_train_steps and checkpoint_every up to 100).
        checkpoint_every: int. Update steps between checkpoints (multiple of steps_per_loop).
        init_checkpoint: str or None. As in `TrainingSettings` (e.g. phase 1 at 128 tokens for
            phase 2 at 512); its config replaces model / bert_config (the weights are
            overwritten when model_dir already holds a checkpoint to resume from).
        vocab_file: str or None. The vocabulary the training data was made with; copied into
            model_dir as vocab.txt (its size must equal the model's vocab_size).
        lower_case: bool or None. The casing of that tokenization, recorded in model_dir
            (text_config.json).
        objective: str. The pre-training objective: "mlm_nsp" (the paper's masked LM + next
            sentence prediction), "mlm" (masked LM only, RoBERTa), "mlm_sop" (masked LM +
            ALBERT's sentence order prediction: train on records written with
            `create_pretraining_data --objective=mlm_sop`, whose `next_sentence_labels` are 1
            for swapped segments) or "electra" (replaced-token detection with a generator,
            `keras_bert.models.electra`; on packed records too). Objective "mlm" trains on
            RoBERTa's full-sentence rows (`create_pretraining_data --objective=mlm`), or any
            records: it ignores their `next_sentence_labels`.
        generator_size: float. ELECTRA's generator width as a fraction of the encoder's hidden
            size, heads and intermediate size (the paper's 1/4 default).
        next_sentence: bool. Train the NSP head; False is the older spelling of objective "mlm"
            (and objectives "mlm" and "electra" set it False).
        max_instances: int or None. Train on packed records (`create_pretraining_data --pack`)
            of up to this many instances per row; then `max_predictions_per_seq` is the
            records' masked predictions per row (their stats file's `packed_predictions`).
            None: one instance per record (the original format).
        deterministic: bool. Reproducible data order (see `records.make_dataset`) and an exact
            data position on resume; False reads in parallel and re-seeds on resume.
        shuffle_buffer: int. Records in the shuffle buffer.
        max_eval_steps: int or None. Limit of evaluation batches.
    """

    model: str = "base"
    bert_config_file: str | None = None
    bert_config: "BertConfig | None" = None
    vocab_size: int | None = None
    train_files: str | None = None
    eval_files: str | None = None
    batch_size: int = 256
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    num_train_steps: int = 1000
    num_warmup_steps: int = 100
    learning_rate: float = 1e-4
    grad_accumulation_steps: int = 1
    steps_per_execution: int = 1
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    objective: str = "mlm_nsp"
    generator_size: float = 0.25
    next_sentence: bool = True
    max_instances: int | None = None
    deterministic: bool = True
    shuffle_buffer: int = 10000
    max_eval_steps: int | None = None

    def __post_init__(self) -> None:
        if not self.train_files:
            raise ValueError("train_files is required (TFRecord file patterns).")
        if not self.model_dir:
            raise ValueError("model_dir is required (checkpoints, logs and plots go there).")
        self.check_training_settings(
            at_least_one=(
                "batch_size",
                "seq_length",
                "max_predictions_per_seq",
                "num_train_steps",
                "grad_accumulation_steps",
                "steps_per_execution",
                "checkpoint_every",
            )
        )
        self._check_objective()
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise ValueError(
                f"num_warmup_steps {self.num_warmup_steps} must be in [0, num_train_steps "
                f"{self.num_train_steps}]."
            )
        if self.batch_size % self.grad_accumulation_steps:
            raise ValueError(
                f"batch_size {self.batch_size} is not divisible by grad_accumulation_steps "
                f"{self.grad_accumulation_steps}."
            )
        if self.steps_per_loop is None:
            self.steps_per_loop = math.gcd(self.num_train_steps, self.checkpoint_every, 100)
        if (
            self.num_train_steps % self.steps_per_loop
            or self.checkpoint_every % self.steps_per_loop
        ):
            raise ValueError(
                f"steps_per_loop {self.steps_per_loop} must divide num_train_steps "
                f"{self.num_train_steps} and checkpoint_every {self.checkpoint_every}."
            )
        if (self.steps_per_loop * self.grad_accumulation_steps) % self.steps_per_execution:
            raise ValueError(
                f"steps_per_execution {self.steps_per_execution} must divide the micro-steps of a "
                f"loop ({self.steps_per_loop} x {self.grad_accumulation_steps})."
            )

    def _check_objective(self) -> None:
        """Checks objective and generator_size; aligns next_sentence with the objective."""
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}.")
        if not 0 < self.generator_size <= 1:
            raise ValueError(f"generator_size must be in (0, 1], got {self.generator_size}.")
        if self.objective in ("mlm", "electra"):
            self.next_sentence = False
        elif not self.next_sentence:
            self.objective = "mlm"

    def check_paths(self) -> None:
        """Raises FileNotFoundError naming a local input path that does not exist
        (`run_pretraining` calls it first; the command line before TensorFlow loads)."""
        paths.require_path("init_checkpoint", self.init_checkpoint, paths.INIT_CHECKPOINT_KINDS)
        paths.require_path(
            "bert_config_file", self.bert_config_file, "an original bert_config.json"
        )
        paths.require_path(
            "vocab_file", self.vocab_file, "the vocab.txt the training data was made with"
        )

    def resolve_bert_config(self) -> "BertConfig":
        """The `BertConfig` chosen by bert_config / bert_config_file / model (+ vocab_size)."""
        from keras_bert.config import BertConfig

        if self.bert_config is not None:
            config = self.bert_config
        elif self.bert_config_file:
            config = BertConfig.from_json_file(self.bert_config_file)
        else:
            config = BertConfig.preset(self.model)
        return config.replace(vocab_size=self.vocab_size) if self.vocab_size else config
