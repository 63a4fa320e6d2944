"""Packed pre-training rows (issue 44): each instance gets exactly its outputs and losses alone,
on TensorFlow, JAX and PyTorch; no token attends across instances; first-fit-decreasing and
SPFHP packing; the packed TFRecords' round trip, efficiency, raw-text packing and training (one
device, mirrored, save/load)."""

import importlib.util
import itertools
import os
import subprocess
import sys

import generated_corpus
import keras
import numpy as np
import packing_job
import pytest
import tensorflow as tf

from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.pretraining import packing, records, runner
from keras_bert.pretraining.static_records import create_pretraining_data
from keras_bert.testing.real_data import real_file

S, P, INSTANCES = 64, 5, 4


def test_packed_row_equals_instances_alone_and_never_attends_across():
    packing_job.check_packed_equals_alone()


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                importlib.util.find_spec(name) is None, reason=f"{name} is not installed"
            ),
        )
        for name in ("jax", "torch")
    ],
)
def test_packed_row_equals_instances_alone_on_other_backends(backend):
    env = dict(os.environ, KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, packing_job.__file__], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and f"ok {backend}" in done.stdout, done.stderr[-3000:]


def _reference_ffd(lengths, capacity, max_instances):
    """First-fit-decreasing, written out plainly."""
    bins = []
    for item in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        for b in bins:
            if sum(lengths[i] for i in b) + lengths[item] <= capacity and len(b) < max_instances:
                b.append(item)
                break
        else:
            bins.append([item])
    return bins


def _optimal_bins(lengths, capacity, max_instances):
    """The fewest bins, by brute force over every assignment (small inputs only)."""
    n = len(lengths)
    for k in range(1, n + 1):
        for assignment in itertools.product(range(k), repeat=n):
            loads, counts = [0] * k, [0] * k
            for b, length in zip(assignment, lengths):
                loads[b] += length
                counts[b] += 1
            if max(loads) <= capacity and max(counts) <= max_instances:
                return k
    return n


@pytest.mark.parametrize("seed", range(6))
def test_first_fit_decreasing_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 13, size=7)
    capacity, max_instances = 16, 3
    bins = packing.first_fit_decreasing(lengths, capacity, max_instances)
    assert bins == _reference_ffd(list(lengths), capacity, max_instances)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    for b in bins:
        assert lengths[b].sum() <= capacity and len(b) <= max_instances
    assert len(bins) <= _optimal_bins(list(lengths), capacity, max_instances) + 1
    many = rng.integers(1, 129, size=300)
    assert packing.first_fit_decreasing(many, 128) == _reference_ffd(list(many), 128, 300)
    with pytest.raises(ValueError, match="length"):
        packing.first_fit_decreasing([3, 20], 16)


@pytest.mark.parametrize("seed", range(6))
def test_shortest_pack_first_packs_validly_and_about_as_tightly_as_ffd(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 13, size=7)
    bins = packing.shortest_pack_first(lengths, 16, 3)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    for b in bins:
        assert lengths[b].sum() <= 16 and len(b) <= 3
    assert len(bins) <= _optimal_bins(list(lengths), 16, 3) + 1
    many = np.minimum(rng.geometric(1 / 40, size=2000), 128)  # mostly short, as real documents
    spfhp = packing.shortest_pack_first(many, 128, 4)
    ffd = packing.first_fit_decreasing(many, 128, 4)
    assert sorted(i for b in spfhp for i in b) == list(range(len(many)))
    assert all(many[b].sum() <= 128 and len(b) <= 4 for b in spfhp)
    assert len(spfhp) <= 1.05 * len(ffd)  # about as tight (here within 2.5%)
    assert packing.efficiency(many, len(spfhp), 128) > 2.5 * packing.efficiency(many, 2000, 128)


def _write(tmp_path, name, pack, corpus=None, vocab=None, seq=S, **kwargs):
    vocab = vocab or generated_corpus.write_vocab(tmp_path / "vocab.txt")
    if corpus is None:
        corpus = generated_corpus.write_corpus(
            tmp_path / "corpus.txt", generated_corpus.documents(40, seed=3, max_sentences=3)
        )
    out = str(tmp_path / name)
    files = create_pretraining_data(
        corpus,
        out,
        vocab,
        max_seq_length=seq,
        max_predictions_per_seq=P,
        dupe_factor=2,
        short_seq_prob=0.5,
        seed=5,
        pack=pack,
        max_instances=INSTANCES,
        **kwargs,
    )
    stats = __import__("json").load(open(os.path.join(out, "pretraining-stats.json")))
    return files, stats


def _records(files, spec):
    parse = lambda r: tf.io.parse_single_example(r, spec)  # noqa: E731
    return [{k: v.numpy() for k, v in parse(r).items()} for r in tf.data.TFRecordDataset(files)]


def _unpack(row):
    """The instances of a packed record, each as a tuple of its original features."""
    out = []
    for k in range(1, row["instance_ids"].max() + 1):
        where = np.flatnonzero(row["instance_ids"] == k)
        start, n = where[0], len(where)
        assert row["cls_positions"][k - 1] == start and row["next_sentence_weights"][k - 1] == 1
        np.testing.assert_array_equal(row["position_ids"][where], np.arange(n))
        mine = (row["masked_lm_positions"] >= start) & (row["masked_lm_positions"] < start + n)
        mine &= row["masked_lm_weights"] > 0
        out.append(
            (
                tuple(row["input_ids"][where]),
                tuple(row["segment_ids"][where]),
                tuple(row["masked_lm_positions"][mine] - start),
                tuple(row["masked_lm_ids"][mine]),
                int(row["next_sentence_labels"][k - 1]),
            )
        )
    assert row["next_sentence_weights"][len(out) :].sum() == 0
    return out


def test_packed_records_round_trip_and_hold_every_instance_once(tmp_path):
    plain, plain_stats = _write(tmp_path, "plain", pack=False)
    packed_files, stats = _write(tmp_path, "packed", pack=True)
    q = stats["settings"]["packed_predictions"]
    rows = _records(packed_files, records.feature_spec(S, q, INSTANCES))
    assert len(rows) == stats["rows"] < plain_stats["examples"] == stats["examples"]
    instances = []
    for row in rows:
        assert row["input_mask"].sum() == (row["instance_ids"] > 0).sum() <= S
        instances += _unpack(row)
    alone, plain_records = [], _records(plain, records.feature_spec(S, P))
    for ex in plain_records:
        n, real = ex["input_mask"].sum(), ex["masked_lm_weights"] > 0
        alone.append(
            (
                tuple(ex["input_ids"][:n]),
                tuple(ex["segment_ids"][:n]),
                tuple(ex["masked_lm_positions"][real]),
                tuple(ex["masked_lm_ids"][real]),
                int(ex["next_sentence_labels"][0]),
            )
        )
    assert sorted(instances) == sorted(alone)  # the same instances, each exactly once
    # SPFHP packs the same instances, about as tightly.
    features = {k: np.stack([ex[k] for ex in plain_records]) for k in records.FEATURE_NAMES}
    spfhp, _ = packing.pack_examples(features, INSTANCES, q, algorithm="spfhp")
    spfhp_rows = [{k: v[r] for k, v in spfhp.items()} for r in range(len(spfhp["input_ids"]))]
    assert sorted(i for row in spfhp_rows for i in _unpack(row)) == sorted(alone)
    assert len(spfhp_rows) <= 1.05 * len(rows)
    with pytest.raises(ValueError, match="algorithm"):
        packing.pack_examples(features, INSTANCES, q, algorithm="best")
    assert stats["packing_efficiency"] == pytest.approx(stats["tokens"] / (len(rows) * S))
    assert stats["packing_efficiency"] > stats["unpacked_efficiency"] + 0.1
    # The reader's packed batches train the packed pre-trainer; the plain reader refuses them.
    batch = next(iter(records.make_dataset(packed_files, 4, S, q, max_instances=INSTANCES)))
    assert batch[0]["cls_positions"].shape == (4, INSTANCES)
    assert batch[1]["next_sentence_labels"].shape == (4, INSTANCES)
    with pytest.raises(ValueError, match="next_sentence_labels"):
        records.make_dataset(packed_files, 4, S, q)
    keras.utils.set_random_seed(0)
    config = packing_job.tiny_config(len(generated_corpus.VOCABULARY), S, 1)
    model = BertPretrainer(BertEncoder(config), packed=True)
    model.compile(optimizer="adam")
    history = model.fit(batch[0], batch[1], batch_size=4, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert 0.0 <= history.history["nsp_accuracy"][-1] <= 1.0
    restored = BertPretrainer.from_config(model.get_config())
    assert restored.packed and "cls_positions" in restored.input


@pytest.mark.skipif(real_file("bert_sample", "sample_text.txt") is None, reason="no sample text")
@pytest.mark.skipif(real_file("bert_uncased", "vocab.txt") is None, reason="no vocabulary")
def test_packing_efficiency_on_the_real_sample_text(tmp_path):
    _, stats = _write(
        tmp_path,
        "sample",
        pack=True,
        corpus=real_file("bert_sample", "sample_text.txt"),
        vocab=real_file("bert_uncased", "vocab.txt"),
        seq=128,
    )
    assert stats["packing_efficiency"] > 0.9
    assert stats["packing_efficiency"] > 1.1 * stats["unpacked_efficiency"]


def _run_settings(tmp_path, name, steps, **overrides):
    """run_pretraining's settings for a tiny packed run on fresh packed records."""
    files, stats = _write(tmp_path, f"data-{name}", pack=True)
    settings = dict(
        bert_config=packing_job.tiny_config(len(generated_corpus.VOCABULARY), S, 1),
        train_files=",".join(files),
        seq_length=S,
        max_predictions_per_seq=stats["settings"]["packed_predictions"],
        max_instances=INSTANCES,
        num_train_steps=steps,
        num_warmup_steps=1,
        learning_rate=1e-3,
        checkpoint_every=steps,
        model_dir=str(tmp_path / name),
        verbose=False,
        plot=False,
    )
    return dict(settings, **overrides)


def test_runner_trains_on_packed_records(tmp_path):
    settings = _run_settings(tmp_path, "run", 2, batch_size=4, max_eval_steps=2)
    summary = runner.run_pretraining(eval_files=settings["train_files"], **settings)
    assert summary["steps"] == 2 and summary["model"].packed
    assert np.isfinite(summary["eval"]["nsp_loss"]) and 0 <= summary["eval"]["nsp_accuracy"] <= 1


def test_raw_text_dynamic_masking_packs_too():
    from keras_bert.pretraining.dynamic import dynamic_masking, pack_rows, pack_texts
    from keras_bert.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(generated_corpus.VOCABULARY)
    texts = [s for d in generated_corpus.documents(20, seed=6) for s in d]
    rows = pack_texts(tf.data.Dataset.from_tensor_slices(texts).batch(64), tokenizer, S)
    alone = [r for b in rows for r in b["input_word_ids"].numpy()]
    packed = pack_rows(rows, max_instances=INSTANCES).batch(8)
    batches = list(dynamic_masking(packed, tokenizer, 12, seed=1))
    inputs = {k: np.concatenate([b[0][k] for b in batches]) for k in batches[0][0]}
    labels = {k: np.concatenate([b[1][k] for b in batches]) for k in batches[0][1]}
    assert "input_mask" not in inputs and "next_sentence_labels" not in labels
    instances = []
    for r in range(len(inputs["input_word_ids"])):
        ids = inputs["input_word_ids"][r].copy()
        real = labels["masked_lm_weights"][r] > 0
        ids[inputs["masked_lm_positions"][r][real]] = labels["masked_lm_ids"][r][real]  # unmask
        for k in range(1, inputs["input_instance_ids"][r].max() + 1):
            where = np.flatnonzero(inputs["input_instance_ids"][r] == k)
            assert inputs["cls_positions"][r][k - 1] == where[0]
            np.testing.assert_array_equal(
                inputs["input_position_ids"][r][where], np.arange(len(where))
            )
            instances.append(tuple(ids[where]))
    assert sorted(instances) == sorted(tuple(a[a > 0]) for a in alone)  # each text exactly once
    tokens = sum(len(i) for i in instances)
    assert packing.efficiency([tokens], len(inputs["input_word_ids"]), S) > 1.5 * (
        packing.efficiency([tokens], len(alone), S)
    )
    keras.utils.set_random_seed(0)
    config = packing_job.tiny_config(len(generated_corpus.VOCABULARY), S, 1)
    model = BertPretrainer(BertEncoder(config), next_sentence=False, packed=True)
    model.compile(optimizer="adam")
    history = model.fit(batches[0][0], batches[0][1], verbose=0)
    assert np.isfinite(history.history["mlm_loss"]).all()


def test_mirrored_two_replicas_follow_one_device_on_packed_rows(tmp_path):
    import json

    import train_job

    one = _run_settings(tmp_path, "one", 3, batch_size=8, steps_per_loop=1)
    bert = one["bert_config"].replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    one["bert_config"] = bert.to_dict()
    two = dict(one, strategy="mirrored", model_dir=str(tmp_path / "two"))
    out = tmp_path / "runs.json"
    spec = dict(configs=[one, two], out=str(out), logical_cpus=2)
    done = subprocess.run(
        [sys.executable, train_job.JOB, json.dumps(spec)], capture_output=True, text=True
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    first, second = json.loads(out.read_text())
    assert second["replicas"] == 2
    for key in ("loss", "mlm_loss", "nsp_loss", "nsp_accuracy"):
        got, want = ([h[key] for h in run["history"]] for run in (second, first))
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=key)


def test_packed_pretrainer_saves_and_loads(tmp_path):
    _, _, model = packing_job._models()
    features = packing_job._instances(np.random.default_rng(0), 40)
    inputs, _ = packing_job._packed_batch(packing.pack_examples(features, 4, 12)[0])
    path = str(tmp_path / "packed.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.packed
    for key, value in model(inputs).items():
        np.testing.assert_array_equal(restored(inputs)[key], value)
