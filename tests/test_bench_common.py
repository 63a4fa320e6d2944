"""The benchmarks' shared helpers: NER scoring (`bench/common.py`: exported entities back to
word tags), FLOP counts, and running a benchmark on several Keras backends (`bench/backends.py`).
"""

import json
import os
import re
import subprocess
import sys

import backends
import bench_pretrain_step
import common
import numpy as np
import pytest

import keras_bert

WORDS = ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]
TAGS = ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]


def entities_of(words, tags):
    """The entities an export would give for gold IOB2 tags: (text, type, start, end) in the
    words joined by spaces."""
    text, starts = " ".join(words), np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    found, i = [], 0
    while i < len(words):
        if tags[i] == "O":
            i += 1
            continue
        kind, j = tags[i][2:], i + 1
        while j < len(words) and tags[j] == f"I-{kind}":
            j += 1
        start, end = int(starts[i]), int(starts[j - 1]) + len(words[j - 1])
        found.append((text[start:end], kind, start, end))
        i = j
    return tuple(found)


def test_word_tags_invert_the_entities_of_gold_tags():
    for words, tags in [
        (WORDS, TAGS),
        (
            ["Peter", "Blackburn", "in", "New", "York", "City"],
            ["B-PER", "I-PER", "O"] + ["B-LOC", "I-LOC", "I-LOC"],
        ),
        (["A", "B"], ["B-PER", "B-PER"]),  # Two entities side by side.
        (["nothing", "here"], ["O", "O"]),
    ]:
        assert common.word_tags(words, entities_of(words, tags)) == tags


def test_an_entity_inside_a_word_tags_words_by_their_start():
    words = ["U.S.", "-based", "Anti-Soviet"]
    text = " ".join(words)
    us = (text[:3], "LOC", 0, 3)  # "U.S", the tokenizer's words without the last "."
    soviet = ("Soviet", "MISC", text.index("Soviet"), len(text))
    assert common.word_tags(words, (us, soviet)) == ["B-LOC", "O", "O"]


def test_ner_answers_read_the_padded_outputs():
    out = {
        "entity_count": np.array([2, 0]),
        "entity_text": np.array([[b"EU", b"German"], [b"", b""]]),
        "entity_type": np.array([[b"ORG", b"MISC"], [b"", b""]]),
        "start_char": np.array([[0, 11], [-1, -1]]),
        "end_char": np.array([[2, 17], [-1, -1]]),
    }
    answers = common.ner_answers(out)
    assert answers == [(("EU", "ORG", 0, 2), ("German", "MISC", 11, 17)), ()]
    assert common.word_tags(WORDS, answers[0])[:3] == ["B-ORG", "O", "B-MISC"]


# === Benchmarks on several Keras backends (bench/backends.py, bench_pretrain_step's FLOPs) ===


def test_parse_backends_names_the_problem():
    assert backends.parse_backends("jax,tensorflow") == ["jax", "tensorflow"]
    assert {"tensorflow", "jax"} <= set(backends.parse_backends("all"))
    for text, problem in (("jax,mxnet", "comma-separated"), ("jax,jax", "twice"), ("", "or 'all'")):
        with pytest.raises(ValueError, match=problem):
            backends.parse_backends(text)


def test_ratio_lines_compare_rows_of_the_same_round():
    def row(backend, model, medians, cpus):
        rounds = [{"median": m, "cpu": c} for m, c in zip(medians, cpus)]
        return {"backend": backend, "model": model, "mode": "m", "rounds": rounds}

    rows = [
        row("tensorflow", "ours", [1.0, 2.0, 1.0], [1.0, 1.0, 1.0]),
        row("tensorflow", "hub", [3.0, 2.0, 1.5], [2.0, 2.0, 2.0]),
        row("jax", "ours", [0.5, 0.5, 0.25], [0.5, 0.5, 0.5]),
    ]
    lines = backends.ratio_lines(
        rows,
        lambda r: r["model"] == "ours",
        lambda r: r["model"] == "hub",
        ("backend",),
        lambda f, s: f"ours/hub {f['backend']}",
    )
    # Per round hub/ours: 3, 1, 1.5 (median 1.5); cpu 2 each round. Nothing across backends.
    assert lines == [
        "speed ours/hub tensorflow: 1.50x wall (rounds 3.00 1.00 1.50), "
        "2.00x cpu time (rounds 2.00 2.00 2.00)"
    ]
    versus = backends.versus_tensorflow(rows, ("model",))
    assert versus == [
        "speed jax m/tensorflow m ours: 4.00x wall (rounds 2.00 4.00 4.00), "
        "2.00x cpu time (rounds 2.00 2.00 2.00)"
    ]


def test_rotated_rounds_interleave_each_call_and_time_it(monkeypatch):
    order, clock = [], [0.0]

    def call(name, cost):
        def run():
            order.append(name)
            clock[0] += cost

        return run

    monkeypatch.setattr(common.time, "perf_counter", lambda: clock[0])
    seconds = common.rotated_rounds({"a": call("a", 1), "b": call("b", 2), "c": call("c", 4)}, 4)
    # Every round calls each once, each round starting one name later; each call's own time.
    assert order == [*"abc", *"bca", *"cab", *"abc"]
    assert seconds == {"a": [1] * 4, "b": [2] * 4, "c": [4] * 4}
    assert common.rotated_rounds({}, 3) == {}


def small_config(layers):
    return keras_bert.BertConfig(
        vocab_size=97,
        hidden_size=24,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=40,
        max_position_embeddings=64,
    )


def count_weights(model, pattern):
    return sum(int(np.prod(v.shape)) for v in model.weights if re.search(pattern, v.path))


@pytest.mark.parametrize("next_sentence", [True, False])
def test_pretraining_step_flops_count_the_models_own_weights(next_sentence):
    """6 N T + 12 L H S T plus the heads on the positions they see, N etc. read from the weights
    of a built BertPretrainer (not from the config)."""
    config = small_config(3)
    model = keras_bert.BertPretrainer(keras_bert.BertEncoder(config), next_sentence=next_sentence)
    batch, seq, predictions = 3, 16, 5
    tokens = batch * seq
    layers = count_weights(model, r"^layer_\d+/.*kernel$")
    # The pooler and NSP classifier, on each sequence; without NSP nothing uses the pooler.
    per_sequence = count_weights(model, r"^(pooler_dense|cls_seq_relationship)/kernel$")
    per_sequence *= next_sentence
    # The MLM head's transform and its output projection (the word embeddings, tied).
    per_masked = count_weights(model, r"^cls_predictions/transform_dense/kernel$|word_embeddings")
    expected = (
        6 * layers * tokens
        + 12 * config.num_hidden_layers * config.hidden_size * seq * tokens
        + 6 * per_sequence * batch
        + 6 * per_masked * batch * predictions
    )
    assert layers == 3 * (4 * 24 * 24 + 2 * 24 * 40) and per_masked == 24 * 24 + 97 * 24
    flops = common.pretraining_step_flops(config, batch, seq, predictions, next_sentence)
    assert flops == expected


def test_electra_step_flops_count_the_models_own_weights():
    """The generator's and the discriminator's per-token weights, their attention, and the
    generator's masked-LM head on the masked positions, read from a built ElectraPretrainer."""
    from keras_bert.models.electra import ElectraPretrainer

    config = small_config(2)
    model = ElectraPretrainer(keras_bert.BertEncoder(config), generator_size=0.25)
    batch, seq, predictions = 3, 16, 5
    tokens = batch * seq
    per_token = count_weights(
        model,
        r"^(generator_project|generator_layer_\d+/.*|layer_\d+/.*|discriminator_\w+)/kernel$",
    )
    per_masked = count_weights(model, r"^generator_predictions/transform_dense/kernel$")
    per_masked += count_weights(model, r"word_embeddings")
    widths = config.hidden_size + model.generator_layers[0].hidden_size  # Both stacks' H.
    expected = 6 * per_token * tokens + 6 * per_masked * batch * predictions
    expected += 12 * config.num_hidden_layers * widths * seq * tokens
    flops = common.electra_step_flops(config, batch, seq, predictions, generator_size=0.25)
    assert flops == pytest.approx(expected)


def test_random_packed_batch_is_what_the_packed_records_give():
    """bench_pretrain_step's packed rows: instances back to back, positions restarting at their
    [CLS], masked positions inside real tokens and never on a [CLS]."""
    from keras_bert.pretraining import records

    inputs, labels = bench_pretrain_step.random_packed_batch(3, 64, 9, 50, instances=4)
    assert set(inputs) == set(records.PACKED_INPUT_FEATURES.values())
    assert set(labels) == set(records.PACKED_LABEL_FEATURES.values())
    for feature, name in bench_pretrain_step.PACKED_NAMES.items():
        assert records.PACKED_INPUT_FEATURES[feature] == name
    for row in range(3):
        ids = inputs["input_instance_ids"][row]
        real = int((ids > 0).sum())
        assert 0.9 * 64 <= real <= 64 and (ids[:real] > 0).all() and (ids[real:] == 0).all()
        assert list(np.unique(ids[:real])) == [1, 2, 3, 4]
        starts = inputs["cls_positions"][row]
        assert (inputs["input_position_ids"][row][starts] == 0).all()
        assert (np.diff(ids[:real]) >= 0).all()
        assert list(np.flatnonzero(np.diff(ids[:real])) + 1) == list(starts[1:])
        masked = inputs["masked_lm_positions"][row]
        assert len(set(masked)) == 9 and masked.max() < real and not set(masked) & set(starts)
    assert labels["next_sentence_labels"].shape == labels["next_sentence_weights"].shape == (3, 4)
    assert (
        labels["masked_lm_ids"]
        == np.take_along_axis(inputs["input_word_ids"], inputs["masked_lm_positions"], axis=1)
    ).all()


def test_pretrain_step_gpu_preset_and_flags():
    args = bench_pretrain_step.parse_args(["--preset", "gpu"])
    assert (args.backend, args.size, args.dtype) == ("jax", "base", "mixed_bfloat16")
    assert (args.seqs, args.batches, args.predictions) == ([128, 512], [256, 64], [20, 80])
    args = bench_pretrain_step.parse_args(["--preset", "gpu", "--size", "tiny", "--batch", "2"])
    assert (args.size, args.batches, args.backend) == ("tiny", [2, 2], "jax")
    with pytest.raises(ValueError, match="--batch needs one value or one per --seq"):
        bench_pretrain_step.parse_args(["--seq", "128,512", "--batch", "1,2,3"])
    peaks = {
        "NVIDIA H100 80GB HBM3": 989.4,
        "NVIDIA H100 PCIe": 756.0,
        "NVIDIA H100 NVL": 835.0,
        "NVIDIA H200": 989.4,
        "cpu": None,
    }
    bf16 = bench_pretrain_step.parse_args(["--dtype", "mixed_bfloat16"])
    for kind, peak in peaks.items():
        assert bench_pretrain_step.peak_tflops(bf16, kind) == peak
    fp32 = bench_pretrain_step.parse_args([])  # A bf16 peak says nothing of float32.
    assert bench_pretrain_step.peak_tflops(fp32, "NVIDIA H100 80GB HBM3") is None
    given = bench_pretrain_step.parse_args(["--peak-tflops", "2.5"])
    assert bench_pretrain_step.peak_tflops(given, "cpu") == 2.5


@pytest.mark.slow  # Two JAX compilations: about a minute alone on 2 cores, 5 under load.
def test_gpu_pretrain_script_runs_on_the_cpu_at_a_tiny_size():
    """bench/gpu_pretrain_jax.sh (the --preset gpu run) end to end on JAX's CPU: its JSON line's
    tokens per second, model FLOPs and MFU agree with the step times it measured."""
    script = os.path.join(os.path.dirname(__file__), "..", "bench", "gpu_pretrain_jax.sh")
    peers = "ours MLM+NSP,ours MLM+NSP packed,ours ELECTRA"
    flags = ["--size", "tiny", "--seq", "16,32", "--batch", "2", "--peers", peers]
    flags += ["--iters", "1", "--repeat", "1", "--peak-tflops", "0.5"]
    done = subprocess.run(
        ["bash", script, *flags],
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The results as one JSON line, then the path of the results file.
    result = json.loads([x for x in done.stdout.splitlines() if x.startswith("{")][-1])
    assert (result["size"], result["dtype"]) == ("tiny", "mixed_bfloat16")
    assert result["backends"]["jax"]["device"] == {"kind": "cpu", "count": 1}
    config = keras_bert.BertConfig.preset("tiny")
    rows = result["rows"]
    assert [(r["backend"], r["model"], r["mode"], r["seq"]) for r in rows] == [
        ("jax", model, "jit", seq) for seq in (16, 32) for model in peers.split(",")
    ]
    for row in rows:
        predictions = {16: 4, 32: 8}[row["seq"]]  # 15% of the length, rounded up to 4.
        assert (row["batch"], row["predictions"]) == (2, predictions)
        seconds = row["step_ms"] / 1e3
        if row["model"] == "ours ELECTRA":
            flops = common.electra_step_flops(config, 2, row["seq"], predictions)
        else:
            flops = common.pretraining_step_flops(config, 2, row["seq"], predictions)
        real = row["real_tokens_per_second"] / row["tokens_per_second"]
        assert real == pytest.approx(row["real_share"]) and 0.5 <= real <= 1
        assert row["model_tflops_per_step"] == pytest.approx(flops / 1e12)
        assert row["tokens_per_second"] == pytest.approx(2 * row["seq"] / seconds)
        assert row["mfu"] == pytest.approx(flops / 1e12 / seconds / 0.5)
        assert row["mfu_6n"] > row["mfu"]  # Counts the embedding tables for every token.
