"""BertConfig: the single source of BERT architecture settings.

Field names are those of the original `bert_config.json`, plus `layer_norm_eps`.
Mapping from the Hugging Face `config.json` happens here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from keras_bert.layers import utils as layer_utils

# Activation names accepted in `hidden_act`: those the layers implement. "gelu" is the
# exact (erf) GELU, as in the paper and Hugging Face; "gelu_new"/"gelu_tanh" the tanh form.
ACTIVATIONS = tuple(layer_utils.ACTIVATIONS)

# Named presets: (num_hidden_layers, hidden_size). Heads = hidden / 64,
# intermediate = 4 * hidden (Turc et al. 2019 for the compact sizes).
_NAMED: dict[str, tuple[int, int]] = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
    "large": (24, 1024),
}
COMPACT_LAYERS = (2, 4, 6, 8, 10, 12)
COMPACT_HIDDEN = (128, 256, 512, 768)
_COMPACT_RE = re.compile(r"^L-(\d+)_H-(\d+)(?:_A-(\d+))?$")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Architecture of a BERT encoder.

    Args:
        vocab_size: int. Number of WordPiece ids.
        hidden_size: int. Width H of every layer.
        num_hidden_layers: int. Number L of Transformer blocks.
        num_attention_heads: int. Heads N; must divide `hidden_size`.
        intermediate_size: int. Width of the feed-forward inner layer (4H).
        hidden_act: str. Feed-forward activation; "gelu" is the erf form.
        hidden_dropout_prob: float. Dropout on embeddings and block outputs.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        max_position_embeddings: int. Longest sequence the model accepts.
        type_vocab_size: int. Number of segment (token type) ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_eps: float. LayerNorm epsilon (1e-12 in the original).

    Example:
    >>> BertConfig.preset("L-4_H-256").num_attention_heads
    4
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})."
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {value!r}.")
        if self.initializer_range <= 0 or self.layer_norm_eps <= 0:
            raise ValueError("BertConfig.initializer_range and layer_norm_eps must be positive.")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"BertConfig.hidden_act {self.hidden_act!r} is not one of {ACTIVATIONS}."
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    # === Presets ===

    @classmethod
    def preset_names(cls) -> list[str]:
        """All preset names: the six named sizes and the 24 compact `L-x_H-y` sizes."""
        compact = [f"L-{layers}_H-{h}" for layers in COMPACT_LAYERS for h in COMPACT_HIDDEN]
        return list(_NAMED) + compact

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> BertConfig:
        """A standard size by name: tiny mini small medium base large, or "L-4_H-512"
        ("L-4_H-512_A-8" also accepted). Keyword overrides replace fields."""
        key = name.strip().lower()
        if key in _NAMED:
            layers, hidden = _NAMED[key]
            heads = 16 if key == "large" else hidden // 64
        else:
            match = _COMPACT_RE.match(name.strip().upper())
            if not match:
                raise ValueError(
                    f"Unknown BERT preset {name!r}; known: {', '.join(cls.preset_names())}."
                )
            layers, hidden = int(match.group(1)), int(match.group(2))
            heads = int(match.group(3)) if match.group(3) else hidden // 64
            if (
                layers not in COMPACT_LAYERS
                or hidden not in COMPACT_HIDDEN
                or heads != hidden // 64
            ):
                raise ValueError(
                    f"Unknown BERT preset {name!r}; compact sizes are L in {COMPACT_LAYERS}, "
                    f"H in {COMPACT_HIDDEN}, A = H/64."
                )
        fields: dict[str, Any] = dict(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * hidden,
        )
        fields.update(overrides)
        return cls(**fields)

    # === Dict and JSON ===

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> BertConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BertConfig:
        """From the original `bert_config.json` dict (unknown keys are an error)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"Unknown BertConfig fields: {unknown}.")
        return cls(**data)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike[str]) -> BertConfig:
        """Read an original `bert_config.json`."""
        with open(_existing(path), encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path} is not valid JSON: {e}") from e
        data.pop("directionality", None)  # In some released configs (e.g. multilingual); unused.
        for key in [k for k in data if k.startswith("pooler_")]:
            data.pop(key)
        return cls.from_dict(data)

    def to_json_file(self, path: str | os.PathLike[str]) -> None:
        """Write an original-style `bert_config.json`."""
        _write_json(path, self.to_dict())

    @classmethod
    def from_hf_dict(cls, data: Mapping[str, Any]) -> BertConfig:
        """From a Hugging Face BERT `config.json` dict."""
        model_type = data.get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(
                f"Hugging Face config has model_type {model_type!r}; only 'bert' is supported."
            )
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("Only absolute position embeddings are supported.")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: data[k] for k in known if k in data})

    @classmethod
    def from_hf_json_file(cls, path: str | os.PathLike[str]) -> BertConfig:
        with open(_existing(path), encoding="utf-8") as f:
            return cls.from_hf_dict(json.load(f))

    def to_hf_dict(self) -> dict[str, Any]:
        """A Hugging Face `config.json` dict for BertModel / BertForPreTraining."""
        data = self.to_dict()
        data.update(
            model_type="bert",
            architectures=["BertForPreTraining"],
            pad_token_id=0,
            position_embedding_type="absolute",
            torch_dtype="float32",
            use_cache=True,
        )
        return data


def _existing(path: str | os.PathLike[str]) -> str:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Config file not found: {path}")
    return path


def _write_json(path: str | os.PathLike[str], data: Mapping[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
