"""Integer TFLite on real data (slow): all-MiniLM-L6-v2 fine-tuned on SST-2 dev's even rows (only
its dev file is at hand), int8 calibrated by default on the training texts its run recorded,
against the float model on the held-out odd rows (as bench/bench_tflite.py measures it)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.checkpoints.task_model import load_task_model
from keras_bert.export import tflite
from keras_bert.tasks.finetune import run_finetuning
from keras_bert.testing.real_data import minilm_dir, real_file
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer

NEAR_TIE = 0.05


@pytest.mark.slow
def test_int8_keeps_the_labels_of_a_real_finetuned_minilm(tmp_path):
    sst2, minilm = real_file("sst2", "dev.tsv"), minilm_dir()
    if sst2 is None or minilm is None:
        pytest.skip("needs the real SST-2 dev file and all-MiniLM-L6-v2")
    with open(sst2, encoding="utf-8") as f:
        lines = f.read().splitlines()
    data_dir = tmp_path / "SST-2"
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text("\n".join([lines[0]] + lines[1::2]) + "\n")
    (data_dir / "dev.tsv").write_text("\n".join([lines[0]] + lines[2::2]) + "\n")
    run_finetuning(
        task="sst2",
        data_dir=str(data_dir),
        init_checkpoint=minilm,
        model_dir=str(tmp_path / "run"),
        do_train=True,
        learning_rate=5e-5,
        num_train_epochs=2,
        batch_size=16,
        seq_length=128,
        verbose=False,
    )
    model_dir = str(tmp_path / "run" / "model")
    path = tflite.export_tflite(model_dir, str(tmp_path / "int8"), quantize="int8")
    texts = [line.split("\t")[0] for line in lines[2::2]]
    model, info, vocab_file = load_task_model(model_dir)
    preprocessor = BertPreprocessor(BertTokenizer(vocab_file, lower_case=True), seq_length=128)
    want = tf.nn.softmax(model(preprocessor(tf.constant(texts)))["logits"]).numpy()
    runner = tflite.load_interpreter(os.path.join(path, tflite.MODEL_FILE)).get_signature_runner(
        "serving_default"
    )
    got = np.concatenate(
        [
            runner(text=tflite.as_strings(texts[i : i + 32]))["probabilities"]
            for i in range(0, len(texts), 32)
        ]
    )
    same = got.argmax(-1) == want.argmax(-1)
    decided = np.abs(want[:, 1] - 0.5) > NEAR_TIE
    assert same.mean() >= 0.98 and same[decided].mean() >= 0.99, (
        same.mean(),
        same[decided].mean(),
    )
