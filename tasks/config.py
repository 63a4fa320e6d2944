"""`FinetuneConfig`: the settings of a fine-tuning run (light: the command line,
`keras_bert.tasks.finetune`, defines its flags from it and checks names and paths before
TensorFlow loads; the runner is `keras_bert.tasks.finetuning`)."""

import dataclasses
import os
import sys
from typing import Any

from keras_bert import paths
from keras_bert.tasks import registry
from keras_bert.training.settings import TrainingSettings

# The paper's GLUE recipe (§4.1, A.3); tasks override some of it (TaskDefinition.recipe).
RECIPE: dict[str, int | float] = {
    "seq_length": 128,
    "batch_size": 32,
    "learning_rate": 2e-5,
    "num_train_epochs": 3,
}


@dataclasses.dataclass
class FinetuneConfig(TrainingSettings):
    """Settings of a fine-tuning run (the command-line flags have the same names).

    The fields every run has (model_dir, init_checkpoint, model, vocab_file, lower_case,
    batch_size, eval_batch_size, seq_length, learning_rate, optimizer, weight_decay, clip_norm,
    strategy, tpu, mixed_precision, jit_compile, steps_per_loop, checkpoint_every,
    keep_checkpoints, seed, verbose, plot) are `keras_bert.training.settings.TrainingSettings`'s;
    those it says more about are listed here too.

    Args:
        task: str. A task name of `keras_bert.tasks.registry` (cola, sst2, mrpc, ...).
        data_dir: str. The task's folder of its benchmark distribution (e.g. glue/MRPC).
        tfds: bool. Read the data from tensorflow-datasets instead of data_dir.
        train_file, eval_file: str or None. Files replacing the usual names in data_dir.
        init_checkpoint: str. Google TF1 checkpoint, Hugging Face directory or the model_dir
            of `run_pretraining`; its vocabulary and casing are used unless given below.
        model: str or None. A BertConfig preset to start from random weights instead
            (needs vocab_file).
        model_dir: str. The run directory (see the module docstring).
        do_train, do_eval, do_predict: bool.
        seq_length, batch_size, learning_rate, num_train_epochs: the recipe; None takes the
            task's default (GLUE: 128, 32, 2e-5, 3).
        warmup_proportion: float. Linear warmup over this fraction of the steps.
        optimizer: "adam_weight_decay" (the original BERT optimizer), "adamw" or "lamb".
        dropout: float. Dropout rate of the task head (0.1); the encoder keeps the rates of its
            checkpoint's config (hidden_dropout_prob, attention_probs_dropout_prob).
        buckets: str or None. Comma-separated fixed padded lengths; default: pad each batch
            to its longest example, except under jit_compile or TPU, where the lengths of
            `features.DEFAULT_BUCKETS` below seq_length and seq_length itself are used.
        steps_per_loop: int or None. Update steps per logging loop (a divisor of an epoch).
        checkpoint_every: int or None. Save every this many steps, rounded to a loop (and
            always at the end of an epoch).
        max_train_examples, max_eval_examples: int or None. Use only the first examples.
        lora_rank: int or None. Fine-tune with LoRA of this rank (1 to the hidden size) on the
            attention and feed-forward kernels of every block, the rest of the encoder frozen,
            the task head trained (`keras_bert.models.lora`); model/ holds merged weights.
        lora_alpha: float or None. LoRA's updates are scaled by lora_alpha / lora_rank;
            default lora_rank (scale 1).
        save_adapters: bool. With lora_rank, also write model/adapters.npz and adapters.json
            (LoRA and head weights; `keras_bert.checkpoints.adapters.load_adapters`).
        save_hf: bool. Also write run_dir/hf/: the fine-tuned model as a Hugging Face
            `BertFor...` directory (labels, vocab.txt, casing) that transformers'
            `AutoModelFor...` and `AutoTokenizer` load (`keras_bert.checkpoints.hf_tasks`).
        quantization_aware: bool. Fine-tune with the weights and activations fake-quantized as
            `--quantize=int8_integer_only` TFLite computes them (`keras_bert.rewrites.fake_quant`,
            `keras_bert.tasks.quantization_aware`); model/ holds the float model, whose integer
            export then keeps more of its answers. Needs do_train.
        task_options: dict. The task's own options (`registry.options_class(task)`: SQuAD's
            doc_stride, max_query_length, n_best_size, max_answer_length,
            null_score_diff_threshold; NER's entity_types, document_context; the sentence tasks'
            long_text, doc_stride, max_windows, window_pooling, `keras_bert.tasks.long_text`);
            the command line has a flag of each name.
    """

    task: str | None = None
    data_dir: str | None = None
    tfds: bool = False
    train_file: str | None = None
    eval_file: str | None = None
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    num_train_epochs: int | None = None
    warmup_proportion: float = 0.1
    optimizer: str = "adam_weight_decay"
    dropout: float = 0.1
    buckets: str | None = None
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    lora_rank: int | None = None
    lora_alpha: float | None = None
    save_adapters: bool = False
    save_hf: bool = False
    quantization_aware: bool = False
    task_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.task_object = registry.get_task(self.task, self.task_options)
        if not self.model_dir:
            raise ValueError(
                "model_dir is required (checkpoints, results, predictions and the model go there)."
            )
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("Nothing to do: pass at least one of do_train, do_eval, do_predict.")
        self._check_model_source()
        for name, value in RECIPE.items():
            if getattr(self, name) is None:
                setattr(self, name, self.task_object.recipe.get(name, value))
        self.eval_batch_size = self.eval_batch_size or self.batch_size
        self.check_training_settings(
            at_least_one=("seq_length", "batch_size", "eval_batch_size", "num_train_epochs")
        )
        self.task_object.check_settings(self.seq_length)
        if not 0 <= self.warmup_proportion < 1:
            raise ValueError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}.")
        self._check_lora()
        if self.quantization_aware and not self.do_train:
            raise ValueError("quantization_aware is a way of training: it needs do_train.")
        pooling = getattr(getattr(self.task_object, "options", None), "token_pooling", "cls")
        if self.save_hf and pooling != "cls":
            raise ValueError(
                f"save_hf writes a Hugging Face BertFor... directory, whose head reads [CLS] "
                f"through the pooler, not token_pooling={pooling!r} (the default with "
                f"long_text=windows): pass token_pooling=cls, or drop save_hf."
            )

    def _check_model_source(self) -> None:
        """Raises unless the model to train is named: init_checkpoint, or model + vocab_file."""
        if not self.init_checkpoint and not (self.model and self.vocab_file):
            raise ValueError(
                "Pass init_checkpoint (a Google, Hugging Face or pre-training run checkpoint), "
                "or model (a BertConfig preset) with vocab_file to start from random weights."
            )

    def _check_lora(self) -> None:
        """lora_rank >= 1 (its upper limit, the hidden size, is checked on the encoder)."""
        if self.lora_rank is not None and self.lora_rank < 1:
            raise ValueError(f"lora_rank must be >= 1 (or None for no LoRA), got {self.lora_rank}.")
        if self.lora_rank is None and (self.lora_alpha is not None or self.save_adapters):
            raise ValueError("lora_alpha and save_adapters need lora_rank.")
        if self.lora_alpha is not None and self.lora_alpha <= 0:
            raise ValueError(f"lora_alpha must be > 0, got {self.lora_alpha}.")

    def check_paths(self) -> None:
        """Raises if a local input path does not exist (see `check_input_paths`)."""
        check_input_paths(self.init_checkpoint, self.vocab_file, self.data_dir, self.tfds)

    @property
    def fixed_shapes(self) -> bool:
        """True where every new input shape compiles anew (XLA, TPU, the JAX backend)."""
        return self.jit_compile or self.strategy == "tpu" or backend_name() == "jax"

    def bucket_lengths(self) -> list[int] | None:
        """The fixed padded lengths, or None to pad each batch to its longest example."""
        assert self.seq_length is not None  # __post_init__ sets it (the task's recipe).
        from keras_bert.text import task_data  # TensorFlow: not at --help.

        if self.buckets:
            lengths = sorted({int(b) for b in str(self.buckets).split(",") if b.strip()})
            if not lengths or lengths[0] < 2:
                raise ValueError(f"buckets must be lengths >= 2, got {self.buckets!r}.")
            return task_data.bucket_sizes(self.seq_length, lengths)
        if self.fixed_shapes:
            return task_data.bucket_sizes(self.seq_length)
        return None


def backend_name() -> str:
    """The Keras backend: Keras' own answer once Keras is imported, else KERAS_BACKEND's (the
    command lines check settings before Keras loads; TensorFlow is their default)."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "config"):
        return keras.config.backend()
    return os.environ.get("KERAS_BACKEND", "tensorflow")


def check_input_paths(
    init_checkpoint: str | None = None,
    vocab_file: str | None = None,
    data_dir: str | None = None,
    tfds: bool = False,
) -> None:
    """Raises FileNotFoundError / NotADirectoryError naming a local input path (a `FinetuneConfig`
    field) that does not exist. `run_finetuning` calls it first; the command line before it
    builds the config (whose task loads TensorFlow), so that a typo fails at once."""
    paths.require_path("init_checkpoint", init_checkpoint, paths.INIT_CHECKPOINT_KINDS)
    paths.require_path("vocab_file", vocab_file, "a vocab.txt, or a directory holding one")
    if not tfds:
        paths.require_path(
            "data_dir",
            data_dir,
            "the task's data folder in its benchmark's own layout "
            "(e.g. glue/MRPC with train.tsv and dev.tsv), or pass tfds",
            directory=True,
        )
