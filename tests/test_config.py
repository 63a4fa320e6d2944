"""BertConfig: presets, original and Hugging Face JSON, validation."""

import json

import pytest

import keras_bert
from keras_bert import BertConfig


def test_named_presets_follow_the_papers():
    expected = {
        "tiny": (2, 128, 2),
        "mini": (4, 256, 4),
        "small": (4, 512, 8),
        "medium": (8, 512, 8),
        "base": (12, 768, 12),
        "large": (24, 1024, 16),
    }
    for name, (layers, hidden, heads) in expected.items():
        config = BertConfig.preset(name)
        assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (
            layers,
            hidden,
            heads,
        )
        assert config.intermediate_size == 4 * hidden and config.vocab_size == 30522


def test_all_24_compact_sizes():
    compact = [n for n in BertConfig.preset_names() if n.startswith("L-")]
    assert len(compact) == 24
    for name in compact:
        config = BertConfig.preset(name)
        assert f"L-{config.num_hidden_layers}_H-{config.hidden_size}" == name
        assert config.num_attention_heads == config.hidden_size // 64
    assert BertConfig.preset("L-4_H-512_A-8") == BertConfig.preset("small")
    assert BertConfig.preset("l-2_h-128") == BertConfig.preset("tiny")


@pytest.mark.parametrize("name", ["huge", "L-3_H-128", "L-2_H-100", "L-2_H-128_A-4"])
def test_unknown_preset_is_a_clear_error(name):
    with pytest.raises(ValueError, match="preset"):
        BertConfig.preset(name)


@pytest.mark.parametrize(
    "fields,match",
    [
        (dict(hidden_size=100, num_attention_heads=12), "divisible"),
        (dict(num_hidden_layers=0), "num_hidden_layers"),
        (dict(vocab_size=-5), "vocab_size"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
        (dict(hidden_act="sigmoid"), "hidden_act"),
        (dict(intermediate_size=3.5), "intermediate_size"),
    ],
)
def test_invalid_configs_are_clear_errors(fields, match):
    with pytest.raises(ValueError, match=match):
        BertConfig(**fields)


def test_original_json_round_trip(tmp_path):
    # The released uncased_L-12_H-768_A-12/bert_config.json, field for field.
    original = {
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 768,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "type_vocab_size": 2,
        "vocab_size": 30522,
    }
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(original))
    config = BertConfig.from_json_file(path)
    assert config == BertConfig.preset("base")
    config.to_json_file(tmp_path / "out.json")
    written = json.loads((tmp_path / "out.json").read_text())
    assert {k: written[k] for k in original} == original and written["layer_norm_eps"] == 1e-12


def test_hugging_face_round_trip():
    config = BertConfig.preset("mini", vocab_size=1000, layer_norm_eps=1e-6)
    hf = config.to_hf_dict()
    assert hf["model_type"] == "bert" and hf["num_hidden_layers"] == 4
    assert BertConfig.from_hf_dict(hf) == config
    with pytest.raises(ValueError, match="model_type"):
        BertConfig.from_hf_dict({**hf, "model_type": "roberta"})


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.json"):
        BertConfig.from_json_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        BertConfig.from_json_file(bad)
    bad.write_text(json.dumps({"hidden_size": 768, "num_layers": 3}))
    with pytest.raises(ValueError, match="num_layers"):
        BertConfig.from_json_file(bad)


def test_exact_parameter_count_base():
    assert keras_bert.BertEncoder(BertConfig.preset("base")).count_params() == 109_482_240


@pytest.mark.slow  # Initializing 335M parameters takes ~30 s on 2 cores.
def test_exact_parameter_count_large():
    assert keras_bert.BertEncoder(BertConfig.preset("large")).count_params() == 335_141_888
