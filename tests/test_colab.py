"""The Colab notebooks (colab/*.ipynb), executed at a tiny size on the CPU so that none can rot
unnoticed.

Each notebook runs as in Colab, cell by cell in an ipykernel on this Python (nbclient), except:
- the install cell (tag "install") is left out: the package is installed here;
- after the parameters cell (tag "parameters") comes one that sets tiny sizes and data written by
  the test (papermill's convention); each name it sets must be a parameter of the notebook;
- a last cell prints, as JSON, what the notebook claims (metrics, answers, paths), which the tests
  check together with the files the notebook wrote.
No network: checkpoints and the SQuAD files are fetched from file:// URLs by the notebooks' own
download cells. The fine-tuned GLUE model of notebook 02 is what notebook 04 exports.
"""

import ast
import configparser
import glob
import json
import os
import re
import sys
import zipfile

import finetune_cases
import nbformat
import numpy as np
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from keras_bert import BertConfig, BertEncoder, checkpoints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLAB = os.path.join(ROOT, "colab")
NOTEBOOKS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(COLAB, "*.ipynb")))
EXECUTED = {
    "01_pretraining_tpu.ipynb",
    "02_finetune_glue.ipynb",
    "03_squad.ipynb",
    "04_export_serving_tflite.ipynb",
}  # Notebooks run by the tests below.
KERNEL = "keras-bert-test"
JAX_KERNEL = "keras-bert-test-jax"
REPORT = "NOTEBOOK_REPORT "
TINY_BERT = dict(
    num_hidden_layers=1,
    hidden_size=32,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)


def read_notebook(name):
    return nbformat.read(os.path.join(COLAB, name), as_version=4)


def tagged(nb, tag):
    cells = [cell for cell in nb.cells if tag in cell.metadata.get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}, found {len(cells)}"
    return cells[0]


def parameter_names(nb):
    """The names the parameters cell assigns (it holds nothing but assignments)."""
    tree = ast.parse(tagged(nb, "parameters").source)
    assert all(isinstance(node, ast.Assign) for node in tree.body), (
        "the parameters cell may only assign"
    )
    return {target.id for node in tree.body for target in node.targets}


# === The notebooks as stored ===


def test_every_notebook_is_executed_and_listed():
    assert set(NOTEBOOKS) == EXECUTED
    with open(os.path.join(COLAB, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for name in NOTEBOOKS:
        assert f"colab/{name})" in readme, f"colab/README.md has no Open-in-Colab badge for {name}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_stored_notebooks_are_clean(name):
    nb = read_notebook(name)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, (
            f"{name}: outputs left in cell {cell.id}"
        )
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert "install" in code[0].metadata.get("tags", []) and "parameters" in code[1].metadata.get(
        "tags", []
    )
    parameter_names(nb)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_install_cell_pins_the_release_and_the_dependency_set(name):
    install = tagged(read_notebook(name), "install").source
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "setup.cfg"))
    dist = config["metadata"]["name"]
    extra = (
        "[tfds]" if "tfds" in tagged(read_notebook(name), "parameters").source else ""
    )  # A tfds data source.
    assert f'"{dist}{extra} @ git+https://github.com/keras-bert/keras-bert@v0.1.0"' in install
    requires = config["options"]["install_requires"].split()
    for package in ("tensorflow", "tensorflow-text"):
        pin = next(r for r in requires if re.fullmatch(rf"{package}==[\d.*]+", r))
        assert f'"{pin}"' in install, (
            f"{name}: the install cell does not pin {pin} as setup.cfg does"
        )
    if name.startswith("01_"):
        tf_pin = next(r for r in requires if r.startswith("tensorflow==")).split("==")[1]
        assert f'"tensorflow-tpu=={tf_pin}"' in install
        assert "https://storage.googleapis.com/libtpu-tf-releases/index.html" in install


# === Executing them ===


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory):
    """Kernelspecs running this interpreter (the venv's), so no installed "python3" kernel is
    needed: `KERNEL` on TensorFlow, `JAX_KERNEL` with JAX's CPU split into two host devices (what
    `keras.distribution` spreads a batch over, as over a TPU's cores)."""
    root = tmp_path_factory.mktemp("kernels")
    env = {"KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
    if os.environ.get("PYTEST_XDIST_WORKER"):  # Another test worker shares the 2 cores.
        env.update(TF_NUM_INTRAOP_THREADS="1", OMP_NUM_THREADS="1")
    jax_env = dict(env, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    for name, kernel_env in ((KERNEL, env), (JAX_KERNEL, jax_env)):
        os.makedirs(root / name)
        with open(root / name / "kernel.json", "w") as f:
            json.dump(
                {
                    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": f"keras-bert tests ({name})",
                    "language": "python",
                    "env": kernel_env,
                },
                f,
            )
    return str(root)


def execute(name, overrides, report, workdir, kernel_specs, kernel=KERNEL):
    """Runs a notebook without its install cell, with `overrides` after its parameters, in the
    kernelspec `kernel`; returns the JSON value of the expression `report`, evaluated in the
    kernel at the end."""
    nb = read_notebook(name)
    unknown = set(overrides) - parameter_names(nb)
    assert not unknown, f"{name} has no parameters {sorted(unknown)}"
    nb.cells = [cell for cell in nb.cells if "install" not in cell.metadata.get("tags", [])]
    at = nb.cells.index(tagged(nb, "parameters")) + 1
    injected = "\n".join(f"{key} = {value!r}" for key, value in overrides.items())
    nb.cells.insert(
        at, nbformat.v4.new_code_cell(injected, metadata={"tags": ["injected-parameters"]})
    )
    nb.cells.append(
        nbformat.v4.new_code_cell(
            f"import json\nprint({REPORT!r} + json.dumps({report}, default=str))"
        )
    )
    manager = KernelManager(
        kernel_name=kernel, kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernel_specs])
    )
    try:
        NotebookClient(
            nb, km=manager, timeout=600, resources={"metadata": {"path": str(workdir)}}
        ).execute()
    # nbclient shuts down only kernels it made itself: each left running holds 1 GB or more.
    finally:
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)
    lines = [
        line
        for output in nb.cells[-1].outputs
        if output.get("name") == "stdout"
        for line in output.text.splitlines()
        if line.startswith(REPORT)
    ]
    assert len(lines) == 1, nb.cells[-1].outputs
    return json.loads(lines[0][len(REPORT) :])


def zip_dir(directory, path):
    with zipfile.ZipFile(path, "w") as z:
        for name in sorted(os.listdir(directory)):
            z.write(os.path.join(directory, name), name)
    return "file://" + str(path)


@pytest.fixture(scope="module")
def glue_run(tmp_path_factory, kernel_specs):
    """Notebook 02 on tiny SST-2 files, from a tiny Google checkpoint given as a .zip URL."""
    root = tmp_path_factory.mktemp("glue")
    data = finetune_cases.write_sst2(str(root / "SST-2"), n_train=256, n_dev=96, n_test=8)
    checkpoint = finetune_cases.write_checkpoint(str(root / "uncased_L-1_H-32_A-2"))
    overrides = dict(
        TASK="sst2",
        DATA_SOURCE="files",
        DATA_DIR=data,
        INIT_CHECKPOINT=zip_dir(checkpoint, root / "uncased_L-1_H-32_A-2.zip"),
        DOWNLOAD_DIR=str(root / "downloads"),
        MODEL_DIR=str(root / "run"),
        SEQ_LENGTH=64,
        BATCH_SIZE=16,
        LEARNING_RATE=3e-3,
        NUM_TRAIN_EPOCHS=5,
    )
    report = execute(
        "02_finetune_glue.ipynb",
        overrides,
        '{"summary": {k: summary[k] for k in ("eval", "best", "predictions", "model_path", '
        '"steps")}, "strategy": STRATEGY, "precision": MIXED_PRECISION, "init": INIT_CHECKPOINT}',
        root,
        kernel_specs,
    )
    return root, report


def write_corpus(path, num_documents, seed):
    """The original format: one sentence per line, a blank line between documents."""
    rng = np.random.default_rng(seed)
    words = [f"w{a}{b}" for a in "abcdefgh" for b in "abcdefgh"] + ["the", "a", "is", "of", "and"]
    documents = [
        "\n".join(
            " ".join(rng.choice(words, size=int(rng.integers(3, 15)))) + " ."
            for _ in range(int(rng.integers(2, 10)))
        )
        for _ in range(num_documents)
    ]
    path.write_text("\n\n".join(documents) + "\n")
    return str(path)


def tiny_pretraining(tmp_path, **changes):
    """Notebook 01's parameters for a tiny run from scratch on corpora written to `tmp_path`."""
    return dict(
        WORK_DIR=str(tmp_path / "work"),
        MODEL_DIR=str(tmp_path / "model"),
        CORPUS="files",
        CORPUS_FILES=write_corpus(tmp_path / "train.txt", 32, seed=1),
        EVAL_CORPUS_FILES=write_corpus(tmp_path / "eval.txt", 8, seed=2),
        MODEL="tiny",
        MODEL_OVERRIDES=TINY_BERT,
        VOCAB_SIZE=120,
        SEQ_LENGTH=32,
        MAX_PREDICTIONS_PER_SEQ=5,
        DUPE_FACTOR=1,
        NUM_WORKERS=1,
        BATCH_SIZE=8,
        NUM_TRAIN_STEPS=4,
        NUM_WARMUP_STEPS=1,
        **changes,
    )


def test_01_pretraining_from_scratch(tmp_path, kernel_specs):
    model_dir = tmp_path / "model"
    overrides = tiny_pretraining(tmp_path, NUM_SHARDS=2, CHECKPOINT_EVERY=4, STEPS_PER_EXECUTION=2)
    report = execute(
        "01_pretraining_tpu.ipynb",
        overrides,
        '{"steps": summary["steps"], "eval": summary["eval"], "plot": summary["plot"], '
        '"strategy": STRATEGY, "precision": MIXED_PRECISION, "vocab": len(vocabulary), '
        '"init": [init.format, init.lower_case, init.encoder.config.hidden_size]}',
        tmp_path,
        kernel_specs,
    )
    # No TPU here: the fallback chose the CPU in float32.
    assert (report["strategy"], report["precision"]) == ("default", "none")
    assert report["steps"] == 4 and 100 <= report["vocab"] <= 120
    assert set(report["eval"]) >= {"mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss"}
    assert all(0.0 <= report["eval"][k] <= 1.0 for k in ("mlm_accuracy", "nsp_accuracy"))
    for name in (
        "ckpt-4.index",
        "summary.json",
        "history.json",
        "training_curve.png",
        "bert_config.json",
        "vocab.txt",
    ):
        assert (model_dir / name).exists(), name
    assert glob.glob(str(model_dir / "tensorboard" / "train" / "events.out.tfevents.*"))
    assert report["plot"] == str(model_dir / "training_curve.png")
    assert len(glob.glob(str(tmp_path / "work" / "data" / "train" / "*.tfrecord"))) == 2
    assert report["init"] == [
        "pretraining_run",
        True,
        32,
    ]  # What notebooks 02 and 03 can start from.


def test_01_pretraining_on_jax_over_two_host_devices(tmp_path, kernel_specs):
    """BACKEND "jax": Keras on JAX, keras.distribution.DataParallel over two host devices (as over
    a TPU's cores), the package's BertPretrainer and optimizer on the same tf.data records."""
    overrides = tiny_pretraining(
        tmp_path, BACKEND="jax", NUM_SHARDS=1, CHECKPOINT_EVERY=2, STEPS_PER_EXECUTION=1
    )
    report = execute(
        "01_pretraining_tpu.ipynb",
        overrides,
        '{"backend": keras.config.backend(), "devices": len(devices), "distribution": '
        "type(keras.distribution.distribution()).__name__, "
        '"batch_axes": keras.distribution.distribution().get_data_layout((8, 32)).axes, '
        '"precision": MIXED_PRECISION, "summary": {k: summary[k] for k in ("steps", "start_step", '
        '"history", "eval", "plot", "checkpoint")}, "finetune_from": FINETUNE_FROM, '
        '"init": [init.format, init.encoder.config.hidden_size, len(init.vocabulary)]}',
        tmp_path,
        kernel_specs,
        kernel=JAX_KERNEL,
    )
    assert (report["backend"], report["devices"], report["distribution"]) == (
        "jax",
        2,
        "DataParallel",
    )
    assert report["batch_axes"] == ["batch", None]  # Each batch split over the devices.
    summary = report["summary"]
    assert report["precision"] == "none" and (summary["start_step"], summary["steps"]) == (0, 4)
    assert [h["step"] for h in summary["history"]] == [2, 4]  # Two logging loops of 2 steps.
    for loop in summary["history"]:
        assert np.isfinite(loop["mlm_loss"]) and np.isfinite(loop["nsp_loss"])
    assert all(0.0 <= summary["eval"][k] <= 1.0 for k in ("mlm_accuracy", "nsp_accuracy"))
    model_dir = tmp_path / "model"
    assert summary["plot"] == str(model_dir / "training_curve.png")
    assert os.path.exists(summary["plot"])
    assert glob.glob(str(model_dir / "tensorboard" / "train" / "events.out.tfevents.*"))
    # The trained encoder, saved in the original format with the learned vocabulary, loads back
    # as what fine-tuning starts from.
    assert report["finetune_from"] == summary["checkpoint"] == str(model_dir / "encoder")
    assert report["init"][:2] == ["google", 32] and 100 <= report["init"][2] <= 120


@pytest.mark.slow
def test_01_pretraining_from_a_released_checkpoint(tmp_path, kernel_specs):
    """Continued pre-training from a Google checkpoint .zip URL: its vocabulary makes the
    examples."""
    checkpoint = finetune_cases.write_checkpoint(str(tmp_path / "uncased_L-1_H-32_A-2"))
    sentences = [s for s, _ in finetune_cases.sentiment_rows(120, seed=5)]
    for name, part in (("train.txt", sentences[:96]), ("eval.txt", sentences[96:])):
        (tmp_path / name).write_text(
            "\n\n".join("\n".join(part[i : i + 4]) for i in range(0, len(part), 4)) + "\n"
        )
    model_dir = tmp_path / "model"
    overrides = dict(
        WORK_DIR=str(tmp_path / "work"),
        MODEL_DIR=str(model_dir),
        DOWNLOAD_DIR=str(tmp_path / "dl"),
        CORPUS="files",
        CORPUS_FILES=str(tmp_path / "train.txt"),
        EVAL_CORPUS_FILES=str(tmp_path / "eval.txt"),
        INIT_CHECKPOINT=zip_dir(checkpoint, tmp_path / "uncased_L-1_H-32_A-2.zip"),
        SEQ_LENGTH=32,
        MAX_PREDICTIONS_PER_SEQ=5,
        DUPE_FACTOR=1,
        NUM_SHARDS=1,
        NUM_WORKERS=1,
        BATCH_SIZE=8,
        NUM_TRAIN_STEPS=4,
        NUM_WARMUP_STEPS=1,
        CHECKPOINT_EVERY=4,
        STEPS_PER_EXECUTION=1,
    )
    report = execute(
        "01_pretraining_tpu.ipynb",
        overrides,
        '{"steps": summary["steps"], "eval": summary["eval"], "vocab": vocabulary, '
        '"init": [init.format, init.encoder.config.hidden_size]}',
        tmp_path,
        kernel_specs,
    )
    assert report["steps"] == 4 and "mlm_accuracy" in report["eval"]
    assert (
        report["vocab"] == finetune_cases.VOCAB
    )  # The checkpoint's vocabulary, not a learned one.
    assert not (tmp_path / "work" / "data" / "vocab.txt").exists()
    assert report["init"] == ["pretraining_run", finetune_cases.TINY["hidden_size"]]


def test_02_glue_finetuning(glue_run):
    root, report = glue_run
    summary = report["summary"]
    assert (report["strategy"], report["precision"]) == ("default", "none")
    # The .zip URL was fetched and unpacked into DOWNLOAD_DIR, and the runner started from it.
    assert report["init"].startswith(str(root / "downloads"))
    assert os.path.exists(os.path.join(report["init"], "bert_config.json"))
    assert summary["steps"] == 5 * 256 // 16 and 1 <= summary["best"]["epoch"] <= 5
    # It learned (a positive word makes a positive sentence; balanced labels).
    assert summary["eval"]["accuracy"] >= 0.8, summary
    assert [os.path.basename(p) for p in summary["predictions"]] == ["SST-2.tsv"]
    with open(summary["predictions"][0]) as f:
        assert len(f.read().splitlines()) == 1 + 8  # Header and one row per test sentence.
    with open(root / "run" / "eval_results.json") as f:
        assert json.load(f)["accuracy"] == summary["eval"]["accuracy"]
    assert sorted(os.listdir(summary["model_path"])) == [
        "model.keras",
        "task.json",
        "training_texts.tsv",
        "vocab.txt",
    ]
    assert (root / "run" / "training_curve.png").exists()


def squad_files(directory, n_train=48, n_dev=8, seed=0):
    """Official-format SQuAD v1.1 files: "<Name> visited the town in <season>." among filler
    sentences."""
    rng = np.random.default_rng(seed)
    names, seasons = ["anna", "boris", "clara", "felix"], ["spring", "summer", "autumn", "winter"]
    filler = [
        "the",
        "river",
        "flows",
        "past",
        "old",
        "mill",
        "and",
        "a",
        "quiet",
        "road",
        "bridge",
        "is",
        "near",
    ]

    def article(i):
        name, season = str(rng.choice(names)).capitalize(), str(rng.choice(seasons))
        sentences = [
            " ".join(rng.choice(filler, size=5)).capitalize() + "."
            for _ in range(int(rng.integers(1, 4)))
        ]
        sentences.insert(
            int(rng.integers(len(sentences) + 1)), f"{name} visited the town in {season}."
        )
        context = " ".join(sentences)
        at = context.index(name + " visited")
        qas = [
            {
                "id": f"q{i}-who",
                "question": "Who visited the town?",
                "answers": [{"text": name, "answer_start": at}],
            },
            {
                "id": f"q{i}-when",
                "question": f"When did {name} visit the town?",
                "answers": [{"text": season, "answer_start": context.index(season, at)}],
            },
        ]
        return {"title": f"Article {i}", "paragraphs": [{"context": context, "qas": qas}]}

    os.makedirs(directory, exist_ok=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        with open(os.path.join(directory, f"{split}-v1.1.json"), "w") as f:
            json.dump({"version": "1.1", "data": [article(i) for i in range(n)]}, f)
    vocab = (
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?"]
        + filler
        + names
        + seasons
        + ["who", "when", "did", "visit", "visited", "town", "in", "where"]
    )
    return directory, vocab


def test_03_squad_finetuning_export_and_questions(tmp_path, kernel_specs):
    source, vocab = squad_files(str(tmp_path / "source"))
    checkpoint = str(tmp_path / "uncased_L-1_H-32_A-2")
    checkpoints.save(
        BertEncoder(BertConfig(vocab_size=len(vocab), **TINY_BERT)), checkpoint, vocab=vocab
    )
    context = "The old mill is near the river. Clara visited the town in winter."
    questions = [("Who visited the town?", context), ("When did Clara visit the town?", context)]
    overrides = dict(
        DATA_SOURCE="url",
        SQUAD_URL=f"file://{source}/",
        DATA_DIR=str(tmp_path / "data"),
        INIT_CHECKPOINT=checkpoint,
        MODEL_DIR=str(tmp_path / "run"),
        EXPORT_DIR=str(tmp_path / "serving"),
        SEQ_LENGTH=48,
        DOC_STRIDE=16,
        MAX_QUERY_LENGTH=12,
        BATCH_SIZE=16,
        LEARNING_RATE=1e-3,
        NUM_TRAIN_EPOCHS=1,
        SHOW_PREDICTIONS=3,
        QUESTIONS=questions,
    )
    report = execute(
        "03_squad.ipynb",
        overrides,
        '{"eval": summary["eval"], "version_dir": version_dir, "answers": answers, '
        '"predicted": len(predictions)}',
        tmp_path,
        kernel_specs,
    )
    assert sorted(os.listdir(tmp_path / "data")) == [
        "dev-v1.1.json",
        "train-v1.1.json",
    ]  # Fetched from the URL.
    assert 0.0 <= report["eval"]["exact_match"] <= report["eval"]["f1"] <= 100.0
    with open(tmp_path / "run" / "predictions" / "predictions.json") as f:
        assert len(json.load(f)) == report["predicted"] == 2 * 8
    assert report["version_dir"] == str(tmp_path / "serving" / "1")
    assert (tmp_path / "serving" / "1" / "saved_model.pb").exists()
    # The exported model answered every question with a span of its context.
    assert [a["question"] for a in report["answers"]] == [q for q, _ in questions]
    assert all(a["answer"] in context and np.isfinite(a["score"]) for a in report["answers"])


def test_04_export_serving_and_tflite(glue_run, tmp_path, kernel_specs):
    root, glue = glue_run
    texts = ["the movie was really good .", "an awful , boring plot", "it was fine", ""]
    overrides = dict(
        MODEL_DIR=glue["summary"]["model_path"],
        EXPORT_DIR=str(tmp_path / "serving"),
        TFLITE_DIR=str(tmp_path / "mobile"),
        QUANTIZE="none",
        INPUTS={"text": texts},
    )
    report = execute(
        "04_export_serving_tflite.ipynb",
        overrides,
        '{"saved_model": [v.decode() for v in saved_model_answers["label"].numpy()], '
        '"tflite": [v.decode() for v in tflite_answers["label"]], "rest": response, '
        '"version_dir": version_dir, "tflite_dir": tflite_dir}',
        tmp_path,
        kernel_specs,
    )
    assert (tmp_path / "serving" / "1" / "saved_model.pb").exists()
    assert (tmp_path / "mobile" / "1" / "model.tflite").exists()
    assert report["saved_model"][:2] == [
        "1",
        "0",
    ]  # The fine-tuned model's answers, through the export.
    # The TFLite model (tokenizer inside) answers as the SavedModel; REST bodies get the same
    # labels.
    assert report["tflite"] == report["saved_model"]
    assert [p["label"] for p in report["rest"]["predictions"]] == report["saved_model"]
