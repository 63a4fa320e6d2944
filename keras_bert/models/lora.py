"""LoRA on a `BertEncoder` (Hu et al. 2021): low-rank updates of the Transformer blocks' dense
kernels, the rest of the encoder frozen.

Keras' own LoRA (`Dense.enable_lora`) does the work: a LoRA layer's `kernel` is
`kernel + (lora_kernel_a @ lora_kernel_b) * lora_alpha / lora_rank` (A [in, r], B [r, out]),
which `TransformerBlock` reads like any kernel, and saving (`model.save`, `save_weights`) writes
that merged kernel and no LoRA weights: a saved model loads as a plain model.

Adapted: the attention query, key, value and output kernels and the feed-forward intermediate
and output kernels of every block. Frozen: the embeddings, LayerNorms, biases, the pooler and
the original kernels (as in the paper and PEFT's default). Trained: the LoRA weights and the
task head (every weight of the task model outside its encoder).

>>> encoder = BertEncoder(BertConfig.preset("tiny", vocab_size=100))  # doctest: +SKIP
>>> enable_lora(encoder, rank=8)                                       # doctest: +SKIP
"""

from collections.abc import Iterable

import keras
import numpy as np

ADAPTED = ("query", "key", "value", "attention_output", "intermediate", "output_dense")
LORA_WEIGHTS = ("lora_kernel_a", "lora_kernel_b")


def lora_layers(encoder: keras.Model) -> list[keras.layers.Dense]:
    """The dense layers LoRA adapts, block by block in `ADAPTED` order."""
    return [getattr(block, name) for block in encoder.transformer_layers for name in ADAPTED]


def check_rank(rank: int, hidden_size: int) -> None:
    """Raises ValueError unless 1 <= rank <= hidden_size (the smallest side of every adapted
    kernel)."""
    if not 1 <= rank <= hidden_size:
        raise ValueError(
            f"lora_rank must be in [1, {hidden_size}] (the encoder's hidden_size), got {rank}."
        )


def enable_lora(encoder: keras.Model, rank: int, alpha: float | None = None) -> None:
    """Adds LoRA weights of `rank` to the adapted kernels and freezes every other encoder weight.

    Args:
        encoder: a built `BertEncoder` holding the base weights.
        rank: int, 1 <= rank <= hidden_size.
        alpha: float or None. The update is scaled by alpha / rank; None: rank (Keras' default).
    """
    check_rank(rank, encoder.config.hidden_size)
    for variable in encoder.weights:
        variable.trainable = False
    for layer in lora_layers(encoder):
        layer.enable_lora(rank, lora_alpha=alpha)  # A: he_uniform, B: zeros (starts at the base).


def is_lora(variable: keras.Variable) -> bool:
    """True for a LoRA weight (A or B)."""
    return variable.name in LORA_WEIGHTS


def count_parameters(variables: Iterable[keras.Variable]) -> int:
    """The number of scalars in `variables`."""
    return int(sum(np.prod(v.shape) for v in variables))


def full_finetuning_parameters(model: keras.Model) -> int:
    """The parameters full fine-tuning of `model` trains: all of its weights but LoRA's."""
    return count_parameters(v for v in model.weights if not is_lora(v))
