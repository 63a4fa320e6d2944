"""`PretrainingConfig`: the settings of a pre-training run (light: the command line defines its
flags from it without importing TensorFlow; the runner is `keras_bert.pretraining.runner`)."""

import dataclasses
import math
import typing

from keras_bert import paths
from keras_bert.training.choices import check_settings

if typing.TYPE_CHECKING:
    from keras_bert.config import BertConfig


@dataclasses.dataclass
class PretrainingConfig:
    """Settings of a pre-training run (the command-line flags have the same names).

    Args:
        model: str. A `BertConfig` preset name ("tiny" ... "large", "L-4_H-256").
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
        learning_rate: float. Peak learning rate.
        optimizer: "adamw", "lamb" or "adam_weight_decay" (the original BERT optimizer).
        weight_decay: float. Decoupled weight decay (not on LayerNorm and bias).
        clip_norm: float. Global gradient norm clipping (0 for none).
        grad_accumulation_steps: int. Micro-batches of batch_size / this per update.
        strategy: "default", "mirrored", "multi_worker_mirrored" or "tpu".
        tpu: str or None. TPU name or address for strategy "tpu".
        mixed_precision: "none", "mixed_float16" (with dynamic loss scaling) or "mixed_bfloat16".
        jit_compile: bool. Compile the train step with XLA.
        steps_per_execution: int. Micro-steps run per `tf.function` call.
        steps_per_loop: int or None. Update steps per logging loop (default: the largest
            divisor of num_train_steps and checkpoint_every up to 100).
        model_dir: str. The run directory.
        checkpoint_every: int. Update steps between checkpoints (multiple of steps_per_loop).
        keep_checkpoints: int. Checkpoints kept.
        init_checkpoint: str or None. A Google TF1 checkpoint, a Hugging Face directory or
            another run's model_dir (e.g. phase 1 at 128 tokens for phase 2 at 512) to start
            from; its config replaces model / bert_config, its vocab.txt and casing are kept
            unless vocab_file / lower_case are given (the weights are overwritten when model_dir
            already holds a checkpoint to resume from).
        vocab_file: str or None. The vocabulary the training data was made with; copied into
            model_dir as vocab.txt (its size must equal the model's vocab_size).
        lower_case: bool or None. The casing of that tokenization, recorded in model_dir
            (text_config.json).
        next_sentence: bool. Train the NSP head (False: MLM only).
        seed: int. Seeds weights, dropout and data order.
        deterministic: bool. Reproducible data order (see `records.make_dataset`) and an exact
            data position on resume; False reads in parallel and re-seeds on resume.
        shuffle_buffer: int. Records in the shuffle buffer.
        eval_batch_size: int or None. Batch size of the evaluation (default batch_size).
        max_eval_steps: int or None. Limit of evaluation batches.
        verbose: bool. Progress bar.
        plot: bool. Write the training-curve PNG.
    """

    model: str = "base"
    bert_config_file: str = None
    bert_config: "BertConfig" = None
    vocab_size: int = None
    train_files: str = None
    eval_files: str = None
    batch_size: int = 256
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    num_train_steps: int = 1000
    num_warmup_steps: int = 100
    learning_rate: float = 1e-4
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    grad_accumulation_steps: int = 1
    strategy: str = "default"
    tpu: str = None
    mixed_precision: str = "none"
    jit_compile: bool = False
    steps_per_execution: int = 1
    steps_per_loop: int = None
    model_dir: str = None
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    init_checkpoint: str = None
    vocab_file: str = None
    lower_case: bool = None
    next_sentence: bool = True
    seed: int = 0
    deterministic: bool = True
    shuffle_buffer: int = 10000
    eval_batch_size: int = None
    max_eval_steps: int = None
    verbose: bool = True
    plot: bool = True

    def __post_init__(self):
        if not self.train_files:
            raise ValueError("train_files is required (TFRecord file patterns).")
        if not self.model_dir:
            raise ValueError("model_dir is required (checkpoints, logs and plots go there).")
        check_settings(self, at_least_one=("batch_size", "seq_length", "max_predictions_per_seq", "num_train_steps",
                                           "grad_accumulation_steps", "steps_per_execution", "checkpoint_every",
                                           "keep_checkpoints"))
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise ValueError(f"num_warmup_steps {self.num_warmup_steps} must be in [0, num_train_steps "
                             f"{self.num_train_steps}].")
        if self.batch_size % self.grad_accumulation_steps:
            raise ValueError(f"batch_size {self.batch_size} is not divisible by grad_accumulation_steps "
                             f"{self.grad_accumulation_steps}.")
        if self.steps_per_loop is None:
            self.steps_per_loop = math.gcd(self.num_train_steps, self.checkpoint_every, 100)
        if self.num_train_steps % self.steps_per_loop or self.checkpoint_every % self.steps_per_loop:
            raise ValueError(f"steps_per_loop {self.steps_per_loop} must divide num_train_steps "
                             f"{self.num_train_steps} and checkpoint_every {self.checkpoint_every}.")
        if (self.steps_per_loop * self.grad_accumulation_steps) % self.steps_per_execution:
            raise ValueError(f"steps_per_execution {self.steps_per_execution} must divide the micro-steps of a "
                             f"loop ({self.steps_per_loop} x {self.grad_accumulation_steps}).")

    def check_paths(self):
        """Raises FileNotFoundError naming a local input path that does not exist
        (`run_pretraining` calls it first; the command line before TensorFlow loads)."""
        paths.require_path("init_checkpoint", self.init_checkpoint, paths.INIT_CHECKPOINT_KINDS)
        paths.require_path("bert_config_file", self.bert_config_file, "an original bert_config.json")
        paths.require_path("vocab_file", self.vocab_file, "the vocab.txt the training data was made with")

    def resolve_bert_config(self):
        """The `BertConfig` chosen by bert_config / bert_config_file / model (+ vocab_size)."""
        from keras_bert.config import BertConfig

        if self.bert_config is not None:
            config = self.bert_config
        elif self.bert_config_file:
            config = BertConfig.from_json_file(self.bert_config_file)
        else:
            config = BertConfig.preset(self.model)
        return config.replace(vocab_size=self.vocab_size) if self.vocab_size else config
