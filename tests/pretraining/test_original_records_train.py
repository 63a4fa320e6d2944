"""TFRecords written by the original create_pretraining_data (tf-models-official's copy) train here
unchanged."""

import random

import generated_corpus
import numpy as np
from official.nlp.data import create_pretraining_data as original
from official.nlp.tools import tokenization

from keras_bert import BertConfig
from keras_bert.pretraining import records, runner

S, P = 64, 10


def test_original_script_records_train_unchanged(tmp_path):
    vocab_file = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(80, seed=4)
    )
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    instances = original.create_training_instances(
        [corpus],
        tokenizer,
        original.get_processor_text_fn(False, True),
        S,
        3,
        0.1,
        0.15,
        P,
        random.Random(5),
    )
    path = str(tmp_path / "original.tfrecord")
    original.write_instance_to_example_files(instances, tokenizer, S, P, [path], False, False)
    assert records.count_records(path) == len(instances) > 32

    bert_config = BertConfig(
        vocab_size=len(generated_corpus.VOCABULARY),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=S,
    )
    summary = runner.run_pretraining(
        bert_config=bert_config,
        train_files=path,
        eval_files=path,
        batch_size=16,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=60,
        num_warmup_steps=6,
        learning_rate=3e-3,
        model_dir=str(tmp_path / "run"),
        checkpoint_every=30,
        steps_per_loop=30,
        verbose=False,
        plot=False,
    )
    history = summary["history"]
    assert summary["steps"] == 60 and all(np.isfinite(h["loss"]) for h in history)
    # The original's records carry real labels: the MLM loss falls and ends clearly below uniform
    # guessing, ln V (the corpus is random words, so little more than their frequencies can be
    # learned).
    assert history[-1]["mlm_loss"] < history[0]["mlm_loss"] - 0.1
    assert history[-1]["mlm_loss"] < np.log(bert_config.vocab_size) - 0.4
    assert (
        0.0 <= summary["eval"]["mlm_accuracy"] <= 1.0
        and 0.0 <= summary["eval"]["nsp_accuracy"] <= 1.0
    )
