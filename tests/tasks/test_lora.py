"""LoRA fine-tuning: the LoRA forward equals the merged kernels', a run trains only LoRA and the
head, model/ holds the merged model, adapters round-trip, bad ranks fail before any file."""

import os
import shutil

import keras
import numpy as np
import pytest
from finetune_cases import TINY, VOCAB, write_checkpoint, write_sst2
from logical_cpus import run_on_logical_cpus

import keras_bert
from keras_bert import checkpoints
from keras_bert.checkpoints.adapters import load_adapters
from keras_bert.models import lora
from keras_bert.models.task_models import BertClassifier
from keras_bert.tasks import finetuning, registry
from keras_bert.tasks.config import FinetuneConfig
from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.tasks.glue import data as glue
from keras_bert.text.tokenizer import BertTokenizer

RANK, HIDDEN, INNER, C = 2, TINY["hidden_size"], TINY["intermediate_size"], 2


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, TINY["vocab_size"], size=(3, 10)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def test_lora_forward_equals_the_merged_kernels(tmp_path):
    keras.utils.set_random_seed(1)
    model = BertClassifier(keras_bert.BertEncoder(keras_bert.BertConfig(**TINY)), C)
    plain = BertClassifier(keras_bert.BertEncoder(keras_bert.BertConfig(**TINY)), C)
    plain.set_weights(model.get_weights())
    lora.enable_lora(model.encoder, RANK, alpha=3.0)
    x = _inputs()

    def outputs(m):  # Sequence output (LayerNorm scale, about 1) and logits.
        return m.encoder(x, training=False)["sequence_output"].numpy(), m(x)["logits"].numpy()

    base = outputs(model)  # B starts at zero: the base model.
    np.testing.assert_allclose(base[0], outputs(plain)[0], atol=1e-5)
    rng = np.random.default_rng(0)
    for layer, merged in zip(lora.lora_layers(model.encoder), lora.lora_layers(plain.encoder)):
        a = rng.normal(0, 0.3, layer.lora_kernel_a.shape).astype("float32")
        b = rng.normal(0, 0.3, layer.lora_kernel_b.shape).astype("float32")
        layer.lora_kernel_a.assign(a)
        layer.lora_kernel_b.assign(b)
        merged.kernel.assign(merged.kernel.numpy() + a @ b * 3.0 / RANK)  # NumPy reference.
    ours, theirs = outputs(model), outputs(plain)
    assert np.abs(ours[0] - base[0]).max() > 0.1  # The adapters do change the outputs.
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine, reference, rtol=1e-4, atol=1e-5)
    # Saving merges: model.keras loads as a plain model with the same outputs.
    path = str(tmp_path / "m.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert not any(lora.is_lora(v) for v in reloaded.weights)
    for mine, reference in zip(outputs(reloaded), ours):
        np.testing.assert_allclose(mine, reference, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    data = dict(
        data_dir=write_sst2(str(root / "SST-2"), n_train=64, n_dev=32, n_test=8),
        init_checkpoint=write_checkpoint(str(root / "ckpt")),
    )
    summary = run_finetuning(
        task="sst2",
        model_dir=str(root / "run"),
        do_train=True,
        learning_rate=1e-2,
        num_train_epochs=1,
        batch_size=16,
        seq_length=32,
        lora_rank=RANK,
        save_adapters=True,
        verbose=False,
        plot=False,
        **data,
    )
    examples = glue.read_examples(glue.get_spec("sst2"), data["data_dir"], "dev")
    feats = registry.get_task("sst2").encode(examples, BertTokenizer(VOCAB), 32)
    return dict(data, summary=summary, feats=feats)


def _logits(model, feats):
    return finetuning.predict(model, registry.get_task("sst2"), feats, 32)["logits"]


def test_a_run_trains_only_lora_and_the_head(lora_run):
    summary = lora_run["summary"]
    model = summary["model"]
    base = checkpoints.load_encoder(lora_run["init_checkpoint"])
    base_weights = {v.path: v.numpy() for v in base.weights}
    for v in model.encoder.weights:
        if lora.is_lora(v):
            continue
        np.testing.assert_array_equal(v.numpy(), base_weights[v.path], err_msg=v.path)
    for layer in lora.lora_layers(model.encoder):  # B starts at zero: training moved it.
        assert np.abs(layer.lora_kernel_b.numpy()).max() > 0
    # Per block: 4 attention kernels H x H, intermediate H x I, output I x H; head H x C + C.
    per_block = 4 * RANK * (HIDDEN + HIDDEN) + 2 * RANK * (HIDDEN + INNER)
    expected = TINY["num_hidden_layers"] * per_block + HIDDEN * C + C
    assert summary["trainable_parameters"] == expected
    full = BertClassifier(keras_bert.BertEncoder(keras_bert.BertConfig(**TINY)), C)
    assert summary["full_finetuning_parameters"] == full.count_params() > 10 * expected


def test_model_dir_holds_the_merged_model(lora_run):
    path = os.path.join(lora_run["summary"]["model_path"], "model.keras")
    reloaded = keras.saving.load_model(path)
    assert not any(lora.is_lora(v) for v in reloaded.weights)
    trained = lora_run["summary"]["model"]
    for plain, adapted in zip(
        lora.lora_layers(reloaded.encoder), lora.lora_layers(trained.encoder)
    ):
        merged = adapted._kernel.numpy() + adapted.lora_kernel_a.numpy() @ (
            adapted.lora_kernel_b.numpy()
        ) * (adapted.lora_alpha / adapted.lora_rank)
        np.testing.assert_allclose(plain.kernel.numpy(), merged, atol=1e-6)
    np.testing.assert_allclose(
        _logits(reloaded, lora_run["feats"]),
        _logits(lora_run["summary"]["model"], lora_run["feats"]),
        atol=1e-5,
    )


def test_adapters_on_the_base_checkpoint_give_the_same_outputs(lora_run):
    model_path = lora_run["summary"]["model_path"]
    size = os.path.getsize(os.path.join(model_path, "adapters.npz"))
    assert size < os.path.getsize(os.path.join(model_path, "model.keras")) / 5
    expected = _logits(lora_run["summary"]["model"], lora_run["feats"])
    model = load_adapters(lora_run["init_checkpoint"], model_path)
    np.testing.assert_allclose(_logits(model, lora_run["feats"]), expected, atol=1e-5)
    # Onto a task model built on the base encoder (the head's initial weights replaced).
    built = BertClassifier(checkpoints.load_encoder(lora_run["init_checkpoint"]), C)
    model = load_adapters(built, model_path)
    np.testing.assert_allclose(_logits(model, lora_run["feats"]), expected, atol=1e-5)


def test_bad_lora_settings_fail_before_any_file(lora_run, tmp_path):
    settings = dict(
        task="sst2", model_dir=str(tmp_path / "run"), do_train=True, seq_length=32, batch_size=16
    )
    for rank in (0, -1):
        with pytest.raises(ValueError, match=f"lora_rank must be >= 1.*got {rank}"):
            FinetuneConfig(init_checkpoint="x", lora_rank=rank, **settings)
    with pytest.raises(ValueError, match="need lora_rank"):
        FinetuneConfig(init_checkpoint="x", save_adapters=True, **settings)
    with pytest.raises(ValueError, match=r"lora_rank must be in \[1, 32\].*got 33"):
        run_finetuning(
            lora_rank=33,
            data_dir=lora_run["data_dir"],
            init_checkpoint=lora_run["init_checkpoint"],
            **settings,
        )
    run_dir = tmp_path / "run"
    assert not run_dir.exists() or not os.listdir(run_dir)


def test_a_resumed_run_keeps_its_lora_settings(lora_run, tmp_path):
    """Resumed without --lora_rank, a LoRA run restores its LoRA model (lora.json) and trains on;
    other LoRA settings than its own are an error."""
    run_dir = tmp_path / "run"
    shutil.copytree(os.path.dirname(lora_run["summary"]["model_path"]), run_dir)
    settings = dict(
        task="sst2",
        model_dir=str(run_dir),
        do_train=True,
        learning_rate=1e-2,
        batch_size=16,
        seq_length=32,
        verbose=False,
        plot=False,
        data_dir=lora_run["data_dir"],
        init_checkpoint=lora_run["init_checkpoint"],
    )
    with pytest.raises(ValueError, match="resume it with its own settings"):
        run_finetuning(num_train_epochs=2, lora_rank=RANK + 1, **settings)
    resumed = run_finetuning(num_train_epochs=2, **settings)
    assert (resumed["start_step"], resumed["steps"]) == (4, 8)
    assert resumed["trainable_parameters"] == lora_run["summary"]["trainable_parameters"]
    assert any(lora.is_lora(v) for v in resumed["model"].weights)


def test_a_lora_run_exports_to_a_saved_model_with_its_answers(lora_run, tmp_path):
    """model/ of a LoRA run holds merged weights: the export takes it unchanged and answers raw
    text with the trained model's probabilities."""
    import tensorflow as tf

    from keras_bert.export import export_saved_model

    examples = glue.read_examples(glue.get_spec("sst2"), lora_run["data_dir"], "dev")
    serving = tf.saved_model.load(
        export_saved_model(lora_run["summary"]["model_path"], str(tmp_path / "serving"))
    )
    answers = serving.signatures["serving_default"](text=tf.constant([e.text_a for e in examples]))
    expected = keras.ops.softmax(_logits(lora_run["summary"]["model"], lora_run["feats"])).numpy()
    np.testing.assert_allclose(answers["probabilities"].numpy(), expected, atol=1e-5)


@pytest.mark.slow  # 75 s; mirrored fine-tuning itself: test_distributed (default run).
def test_lora_on_two_mirrored_replicas_follows_one_device(lora_run, tmp_path):
    """LoRA under MirroredStrategy (two logical CPUs) trains the same weights with the same
    losses, step for step, as on one device (dropout off: it draws per replica); a LoRA run after
    a full one in the same process (a notebook) shares the process's strategy and runs."""
    checkpoint = write_checkpoint(
        str(tmp_path / "ckpt"), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    code = f"""
from keras_bert.tasks.finetuning import run_finetuning
results = {{}}
for name, strategy, rank in (
    ("one", "default", {RANK}), ("full", "mirrored", None), ("two", "mirrored", {RANK})
):
    summary = run_finetuning(
        task="sst2", model_dir={str(tmp_path)!r} + "/" + name, do_train=True, learning_rate=1e-2,
        num_train_epochs=1, batch_size=16, seq_length=32, lora_rank=rank, verbose=False,
        plot=False, strategy=strategy, dropout=0.0, steps_per_loop=1,
        data_dir={lora_run["data_dir"]!r}, init_checkpoint={checkpoint!r})
    results[name] = dict(
        replicas=summary["replicas"], trainable=summary["trainable_parameters"],
        losses=[h["loss"] for h in summary["history"]])
report(results)
"""
    results = run_on_logical_cpus(code, count=2, timeout=300)
    one, two = results["one"], results["two"]
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert one["trainable"] == two["trainable"] < results["full"]["trainable"] / 10
    assert len(one["losses"]) == 4 and np.ptp(one["losses"]) > 1e-3
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-5, atol=1e-6)
