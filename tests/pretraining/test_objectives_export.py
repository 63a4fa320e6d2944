"""Each pre-training objective leaves an encoder that fine-tunes and exports like any other: a
tiny run per objective on a generated corpus, a text classifier fine-tuned from its directory
(`--init_checkpoint`), and its SavedModel, served by a fresh process with only tensorflow and
tensorflow-text, gives the runner's predicted labels for every text (issue 44)."""

import random

import generated_corpus
import pytest

import keras_bert
from keras_bert.apps.demo.finetuning import read_predictions
from keras_bert.export import export_saved_model
from keras_bert.pretraining.runner import run_pretraining
from keras_bert.pretraining.static_records import create_pretraining_data
from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.testing.five_lines import served_labels

S, P = 32, 5


def _task_data(directory, seed=0):
    """label<TAB>text files: label "x" when the sentence has a word of stem wa*, else "y"."""
    rng = random.Random(seed)
    directory.mkdir()
    rows = []
    for _ in range(48):
        text = generated_corpus.sentence(rng, max_words=10)
        rows.append(("x" if " wa" in f" {text}" else "y", text))
    for name, part in (("train", rows[:32]), ("dev", rows[32:]), ("test", rows[32:])):
        (directory / f"{name}.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in part))
    return [text for _, text in rows[32:]]


@pytest.mark.slow  # A pre-training run, a fine-tuning run and an export per objective.
@pytest.mark.parametrize("objective", ["mlm_nsp", "mlm", "mlm_sop", "electra"])
def test_each_objectives_encoder_fine_tunes_and_serves_the_runners_answers(tmp_path, objective):
    vocab = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(24, seed=1)
    )
    writer = {"mlm": "mlm", "mlm_sop": "mlm_sop"}.get(objective, "mlm_nsp")
    create_pretraining_data(
        corpus,
        str(tmp_path / "records"),
        vocab,
        lower_case=True,
        max_seq_length=S,
        max_predictions_per_seq=P,
        dupe_factor=1,
        num_workers=1,
        objective=writer,
    )
    run_pretraining(
        bert_config=keras_bert.BertConfig.preset(
            "tiny",
            vocab_size=len(generated_corpus.VOCABULARY),
            num_hidden_layers=1,
            intermediate_size=64,
            max_position_embeddings=S,
        ),
        objective=objective,
        train_files=str(tmp_path / "records" / "*.tfrecord"),
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=2,
        num_warmup_steps=1,
        checkpoint_every=2,
        model_dir=str(tmp_path / "run"),
        vocab_file=vocab,
        lower_case=True,
        verbose=False,
        plot=False,
    )
    texts = _task_data(tmp_path / "task")
    summary = run_finetuning(
        task="text_classification",
        data_dir=str(tmp_path / "task"),
        init_checkpoint=str(tmp_path / "run"),
        model_dir=str(tmp_path / "finetune"),
        do_train=True,
        do_eval=True,
        do_predict=True,
        seq_length=S,
        batch_size=8,
        learning_rate=1e-3,
        num_train_epochs=1,
        verbose=False,
        plot=False,
    )
    runner = read_predictions(summary["predictions"][0])
    version = export_saved_model(summary["model_path"], str(tmp_path / "serving"))
    assert served_labels(version, texts, tmp_path) == runner
    assert set(runner) <= {"x", "y"} and len(runner) == len(texts)
