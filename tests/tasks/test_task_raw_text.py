"""Task models on raw text (keras-hub's `Task` habits): the preprocessor attached, `fit`,
`predict` and `evaluate` on lists, NumPy arrays, pairs as a tuple or a dict, and tf.data;
the paper's recipe without `compile()` (or with it), `compile(...)` overriding it; `.keras` round
trips with the preprocessor; calls on token ids unchanged. A tiny fine-tuned Hugging Face
classifier (tests/checkpoints/hf_tasks/pairs)."""

import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.models.task_models import BertClassifier, BertTokenClassifier
from keras_bert.training.optimizers import AdamWeightDecay, WarmupLinearDecay

PAIRS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "checkpoints", "hf_tasks", "pairs"
)
A = ["The film was great.", "John lives in Paris", "an awful plot", "fine", "bad film", "good"]
B = ["Mary loved it", "where is London ?", "the movie", "plots", "a film", "it was"]
LABELS = np.array([1, 2, 0, 1, 0, 2])


@pytest.fixture(scope="module")
def model():
    return BertClassifier.from_preset(PAIRS, seq_length=16, text_pair=True)


def test_predict_takes_every_text_form(model):
    ids = model.preprocessor((tf.constant(A), tf.constant(B)))
    want = model(ids)["logits"].numpy()  # Calling on token ids still works.
    np.testing.assert_allclose(model.predict((A, B), verbose=0), want, atol=1e-6)
    as_dict = {"text_a": np.array(A), "text_b": np.array(B)}
    np.testing.assert_allclose(model.predict(as_dict, verbose=0), want, atol=1e-6)
    batches = tf.data.Dataset.from_tensor_slices((A, B)).batch(4)
    np.testing.assert_allclose(model.predict(batches, verbose=0), want, atol=1e-6)
    single = model.predict(A[:2], batch_size=1, verbose=0)  # One text: segment B empty.
    ids = model.preprocessor(tf.constant(A[:2]))
    np.testing.assert_allclose(single, model(ids)["logits"].numpy(), atol=1e-6)


def test_a_classifier_computes_no_padding_past_its_batch_and_answers_the_same():
    """Raw-text batches are cut to the smallest bucket (32 here) that holds their longest row, and
    the logits equal those of the inputs padded to the full seq_length (60)."""
    model = BertClassifier.from_preset(PAIRS, seq_length=60, text_pair=True)
    long_a = [" ".join(A * 3)] + A[1:]  # One pair of about 50 tokens.
    batches = [list(model._dataset((a, B), None, batch_size=6)) for a in (A, long_a)]
    assert [b[0]["input_word_ids"].shape for b in batches] == [[6, 32], [6, 60]]
    for a in (A, long_a):
        full = model.preprocessor((tf.constant(a), tf.constant(B)))
        assert full["input_word_ids"].shape == [6, 60]
        want = model(full)["logits"].numpy()
        np.testing.assert_allclose(model.predict((a, B), verbose=0), want, atol=1e-5)


def test_compile_default_is_the_papers_recipe_and_fit_learns(tmp_path):
    model = BertClassifier.from_preset(PAIRS, seq_length=16, text_pair=True)
    model.compile()
    history = model.fit(
        (A, B), LABELS, epochs=3, batch_size=4, verbose=0, validation_data=((A, B), LABELS)
    )
    optimizer = model.optimizer
    schedule = optimizer._learning_rate
    assert isinstance(optimizer, AdamWeightDecay) and isinstance(schedule, WarmupLinearDecay)
    assert schedule.num_train_steps == 3 * math.ceil(len(A) / 4)
    assert schedule.num_warmup_steps == int(0.1 * schedule.num_train_steps)
    assert schedule.peak_learning_rate == 2e-5 and optimizer.weight_decay_rate == 0.01
    assert set(history.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    results = model.evaluate((A, B), LABELS, verbose=0, return_dict=True)
    predicted = model.predict((A, B), verbose=0).argmax(-1)
    assert results["accuracy"] == pytest.approx(np.mean(predicted == LABELS))

    model.compile(optimizer=keras.optimizers.SGD(0.5))  # Any argument replaces its default.
    before = model.evaluate((A, B), LABELS, verbose=0, return_dict=True)["loss"]
    model.fit((A, B), LABELS, epochs=10, batch_size=6, verbose=0, shuffle=False)
    assert model.evaluate((A, B), LABELS, verbose=0, return_dict=True)["loss"] < before

    path = str(tmp_path / "m.keras")
    model.save(path)
    again = keras.saving.load_model(path)
    assert again.preprocessor.tokenizer.vocabulary == model.preprocessor.tokenizer.vocabulary
    assert again.task_facts == model.task_facts
    np.testing.assert_allclose(
        again.predict((A, B), verbose=0), model.predict((A, B), verbose=0), atol=1e-6
    )
    from_file = BertClassifier.from_preset(path)
    np.testing.assert_allclose(
        from_file.predict((A, B), verbose=0), model.predict((A, B), verbose=0), atol=1e-6
    )
    with pytest.raises(ValueError, match="num_classes=2 disagrees"):
        BertClassifier.from_preset(path, num_classes=2)
    with pytest.raises(ValueError, match="holds a fine-tuned BertClassifier"):
        BertTokenClassifier.from_preset(path, num_classes=3)


def test_fit_without_compile_trains_with_the_papers_recipe(tmp_path):
    """A task model comes ready to train: `from_preset(dir, num_classes=2).fit(texts, labels)`
    with no compile() takes the paper's recipe sized to that fit, and the training loss falls."""
    from finetune_cases import sentiment_rows, write_checkpoint

    write_checkpoint(str(tmp_path / "ckpt"))
    texts, labels = zip(*sentiment_rows(16, seed=3))
    labels = np.array(labels)
    model = BertClassifier.from_preset(str(tmp_path / "ckpt"), num_classes=2, seq_length=32)
    before = model.evaluate(list(texts), labels, verbose=0, return_dict=True)
    model.fit(list(texts), labels, epochs=4, batch_size=4, verbose=0)
    schedule = model.optimizer._learning_rate
    assert isinstance(model.optimizer, AdamWeightDecay)
    assert (schedule.num_train_steps, schedule.num_warmup_steps) == (16, 1)
    assert schedule.peak_learning_rate == 2e-5
    after = model.evaluate(list(texts), labels, verbose=0, return_dict=True)
    assert set(after) == {"loss", "accuracy"} and after["loss"] < before["loss"]


def test_compile_still_overrides_the_recipe():
    """compile(...) before fit wins: its optimizer is kept as given (no schedule is sized), its
    loss and metrics replace the task's; compile(learning_rate=...) moves only the peak."""
    model = BertClassifier.from_preset(PAIRS, seq_length=16, text_pair=True)
    sgd = keras.optimizers.SGD(0.5)
    model.compile(optimizer=sgd, metrics=["sparse_categorical_crossentropy"])
    history = model.fit((A, B), LABELS, epochs=2, batch_size=6, verbose=0)
    assert model.optimizer is sgd and int(sgd.iterations.numpy()) == 2
    assert set(history.history) == {"loss", "sparse_categorical_crossentropy"}
    model.compile(learning_rate=5e-5)
    model.fit((A, B), LABELS, epochs=3, batch_size=4, verbose=0)
    schedule = model.optimizer._learning_rate
    assert isinstance(schedule, WarmupLinearDecay) and schedule.peak_learning_rate == 5e-5
    assert schedule.num_train_steps == 3 * math.ceil(len(A) / 4)


def test_bad_inputs_are_named(model):
    with pytest.raises(ValueError, match="6 texts but 2 labels"):
        model.fit((A, B), LABELS[:2], verbose=0)
    bare = BertClassifier(model.encoder, num_classes=3)
    with pytest.raises(ValueError, match="has no preprocessor for raw text"):
        bare.predict(A, verbose=0)


@pytest.mark.slow
def test_runner_save_hf_writes_what_from_preset_and_transformers_read(tmp_path):
    """`run_finetuning(save_hf=True)` writes run/hf/: read back by from_preset (same logits as
    the run's model/, labels), and by transformers where it is installed."""
    from finetune_cases import write_checkpoint, write_sst2

    from keras_bert.tasks.finetuning import run_finetuning

    summary = run_finetuning(
        task="sst2",
        model_dir=str(tmp_path / "run"),
        data_dir=write_sst2(str(tmp_path / "SST-2"), n_train=32, n_dev=8, n_test=4),
        init_checkpoint=write_checkpoint(str(tmp_path / "ckpt")),
        do_train=True,
        num_train_epochs=1,
        batch_size=16,
        seq_length=16,
        save_hf=True,
        verbose=False,
        plot=False,
    )
    texts = ["a good film", "bad"]
    ours = BertClassifier.from_preset(str(tmp_path / "run" / "model"))
    hf = BertClassifier.from_preset(str(tmp_path / "run" / "hf"), seq_length=16)
    assert hf.task_facts["labels"] == ours.task_facts["labels"] == ["0", "1"]
    np.testing.assert_allclose(
        hf.predict(texts, verbose=0), ours.predict(texts, verbose=0), atol=1e-5
    )
    assert summary["model_path"].endswith("model")
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "run" / "hf"
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "run" / "hf")
    encoded = tokenizer(texts, padding="max_length", max_length=16, return_tensors="pt")
    with torch.no_grad():
        logits = theirs.eval()(**encoded).logits.numpy()
    np.testing.assert_allclose(hf.predict(texts, verbose=0), logits, atol=1e-4)


def test_fit_on_pairs_records_text_pair_and_its_export_takes_pairs(tmp_path):
    """A classifier whose directory said nothing, `fit` on pairs (a dict, a tuple, tf.data),
    records text_pair: its SavedModel takes (text, text_b) untold and answers as `predict`; the
    fact survives .keras and Hugging Face round trips; a later fit on single texts records that."""
    from keras_bert import checkpoints, export
    from keras_bert.checkpoints import hf_tasks
    from keras_bert.export.source import load_source

    model = BertClassifier.from_preset(PAIRS, seq_length=16)
    assert model.task_facts["text_inputs"] == ["text"]
    model.compile()
    model.fit({"text_a": A, "text_b": B}, LABELS, epochs=1, batch_size=6, verbose=0)
    assert model.task_facts["text_pair"] is True
    version = export.export_saved_model(model, str(tmp_path / "serving"), warmup_requests=False)
    serving = tf.saved_model.load(version).signatures["serving_default"]
    assert sorted(serving.structured_input_signature[1]) == ["text", "text_b"]
    probabilities = serving(text=tf.constant(A), text_b=tf.constant(B))["probabilities"]
    logits = model.predict((A, B), verbose=0)
    np.testing.assert_allclose(probabilities, tf.nn.softmax(logits), atol=1e-5)

    model.save(str(tmp_path / "m.keras"))
    again = keras.saving.load_model(str(tmp_path / "m.keras"))
    assert again.task_facts == model.task_facts
    with pytest.raises(ValueError, match="text_pair=False disagrees .* fine-tuned on"):
        BertClassifier.from_preset(str(tmp_path / "m.keras"), text_pair=False)
    checkpoints.save(model, tmp_path / "hf", format="huggingface")
    assert hf_tasks.read_facts(tmp_path / "hf").text_pair is True
    assert load_source(model, text_pair=False).text_inputs == ("text",)  # The caller's word.

    model.fit(tf.data.Dataset.from_tensor_slices((A, LABELS)).batch(3), epochs=1, verbose=0)
    assert model.task_facts["text_inputs"] == ["text"] and model.task_facts["text_pair"] is False
    model.fit(tf.data.Dataset.from_tensor_slices(((A, B), LABELS)).batch(3), epochs=1, verbose=0)
    assert model.task_facts["text_inputs"] == ["text", "text_b"]
