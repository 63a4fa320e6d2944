"""The main job (`python -m keras_bert.demo --quick`): from the standard library's docstrings
to a pre-trained tiny BERT, its held-out accuracy table, logs, plot and checkpoint."""

import os
import subprocess
import sys

from keras_bert import demo
from keras_bert.tasks.init_checkpoint import load_init_checkpoint


def test_stdlib_corpus_is_documents_of_sentences(tmp_path):
    documents = demo.stdlib_documents(max_modules=5)
    assert len(documents) == 5
    names = [name for name, _ in documents]
    assert names == sorted(names) and not any(n.split(".")[-1].startswith("_") and n.split(".")[-1] != "__init__"
                                              for n in names)
    assert all(len(text) >= 200 for _, text in documents)
    path = str(tmp_path / "corpus.txt")
    count = demo.write_corpus(documents, path)
    with open(path, encoding="utf-8") as f:
        blocks = [b for b in f.read().split("\n\n") if b.strip()]
    assert len(blocks) == count >= 3  # One block of sentence lines per module.
    assert all(len(b.splitlines()) >= 2 for b in blocks)


def test_quick_demo_runs_and_reports(tmp_path):
    run = subprocess.run([sys.executable, "-m", "keras_bert.demo", "--quick", f"--model_dir={tmp_path}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    for row in ("held-out MLM accuracy", "held-out NSP accuracy", "TensorBoard logs", "training curve"):
        assert row in out
    assert os.path.exists(tmp_path / "run" / "training_curve.png")
    assert os.path.exists(tmp_path / "run" / "ckpt-40.index")
    assert os.path.exists(tmp_path / "data" / "vocab.txt")
    assert any(name.endswith(".tfrecord") for name in os.listdir(tmp_path / "data" / "train"))
    # The run directory is an init checkpoint for tasks: encoder, vocabulary and casing.
    init = load_init_checkpoint(tmp_path / "run")
    assert (init.format, init.lower_case, init.encoder.config.num_hidden_layers) == ("pretraining_run", True, 1)
    with open(tmp_path / "data" / "vocab.txt", encoding="utf-8") as f:
        assert init.vocabulary == f.read().splitlines()
