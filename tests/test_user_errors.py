"""Errors a new user meets, each answered in one line by the command lines (`<prog>: error: ...`,
status 2, no traceback) and by a clear exception from the API: a wrong path, a vocabulary that
does not fit the checkpoint, a task name typo, a batch too large for the device's memory."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf
from finetune_cases import TINY, VOCAB, write_checkpoint, write_sst2

ROOT = os.path.join(os.path.dirname(__file__), "..")


def run_script(script, module, *args, prelude=""):
    """Runs a console script as installed (`console_main` under its name); returns the result."""
    code = (
        f"import sys; sys.argv[0] = {script!r}\n{prelude}\nfrom {module} import "
        "console_main\nconsole_main()"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def assert_one_line(done, prog, *parts):
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{prog}: error: "), done.stderr[-3000:]
    for part in parts:
        assert part in line, line


# === A wrong path: the flag, the path and what belongs there (checked before TensorFlow loads) ===


@pytest.mark.parametrize(
    "script, module, flags, expected",
    [
        (
            "keras-bert-finetune",
            "keras_bert.tasks.finetune",
            ["--task=mrpc", "--do_train", "--model_dir={tmp}/run", "--init_checkpoint={tmp}/nope"],
            ["init_checkpoint={tmp}/nope does not exist; expected a Google checkpoint"],
        ),
        (
            "keras-bert-finetune",
            "keras_bert.tasks.finetune",
            [
                "--task=mrpc",
                "--do_train",
                "--model_dir={tmp}/run",
                "--init_checkpoint={tmp}",
                "--data_dir={tmp}/glue",
            ],
            ["data_dir={tmp}/glue does not exist", "train.tsv"],
        ),
        (
            "keras-bert-pretrain",
            "keras_bert.pretraining.pretrain",
            ["--train_files=x", "--model_dir={tmp}/run", "--vocab_file={tmp}/vocab.txt"],
            ["vocab_file={tmp}/vocab.txt does not exist"],
        ),
        (
            "keras-bert-extract-features",
            "keras_bert.tasks.extract_features",
            ["--input_file={tmp}/in.txt", "--output_file={tmp}/o", "--init_checkpoint={tmp}"],
            ["input_file={tmp}/in.txt does not exist"],
        ),
        (
            "keras-bert-create-pretraining-data",
            "keras_bert.pretraining.create_pretraining_data",
            ["--input_file=x", "--output_dir={tmp}/o", "--vocab_file={tmp}/vocab.txt"],
            ["vocab_file={tmp}/vocab.txt does not exist; expected a WordPiece vocab.txt"],
        ),
        (
            "keras-bert-export",
            "keras_bert.export.__main__",
            ["--model_dir={tmp}/model", "--export_dir={tmp}/e"],
            ["model_dir={tmp}/model does not exist; expected a fine-tuned model/ directory"],
        ),
        (
            "keras-bert-distill",
            "keras_bert.tasks.distill",
            [
                "--teacher={tmp}/mrpc/model",
                "--student_layers=2",
                "--student_layer_ids=0,2",  # A flag (absl refuses unknown ones).
                "--model_dir={tmp}/run",
            ],
            ["teacher={tmp}/mrpc/model does not exist; expected a fine-tuned model/ directory"],
        ),
    ],
)
def test_wrong_paths(tmp_path, script, module, flags, expected):
    tmp = str(tmp_path)
    done = run_script(script, module, *[f.format(tmp=tmp) for f in flags], prelude="import os")
    assert_one_line(done, script, *[e.format(tmp=tmp) for e in expected])


def test_wrong_paths_from_the_api(tmp_path):
    from keras_bert.pretraining.config import PretrainingConfig
    from keras_bert.tasks.config import FinetuneConfig

    config = FinetuneConfig(
        task="sst2", init_checkpoint=str(tmp_path / "ckpt"), model_dir=str(tmp_path), do_eval=True
    )
    with pytest.raises(FileNotFoundError, match=r"init_checkpoint=.*ckpt does not exist; expected"):
        config.check_paths()
    (tmp_path / "file").write_text("x")
    config = FinetuneConfig(
        task="sst2",
        model="tiny",
        vocab_file=str(tmp_path / "file"),
        data_dir=str(tmp_path / "file"),
        model_dir=str(tmp_path),
        do_eval=True,
    )
    with pytest.raises(
        NotADirectoryError, match=r"data_dir=.*file is a file; expected a directory"
    ):
        config.check_paths()
    config = PretrainingConfig(
        train_files="x", model_dir=str(tmp_path), bert_config_file=str(tmp_path / "b.json")
    )
    with pytest.raises(FileNotFoundError, match="bert_config_file=.*b.json does not exist"):
        config.check_paths()
    FinetuneConfig(
        task="sst2",
        init_checkpoint="gs://bucket/ckpt",
        model_dir="gs://b/r",
        do_eval=True,
        tfds=True,
    ).check_paths()  # Remote paths are checked where they are read.


# === A task name typo: the closest valid name, and all of them ===


def test_task_typo(tmp_path):
    done = run_script(
        "keras-bert-finetune",
        "keras_bert.tasks.finetune",
        "--task=mrcp",
        "--do_train",
        f"--model_dir={tmp_path}",
        f"--init_checkpoint={tmp_path}",
    )
    assert_one_line(
        done,
        "keras-bert-finetune",
        "Unknown task 'mrcp'. Did you mean 'mrpc'?",
        "Tasks: cola, sst2",
    )


def test_flag_errors_are_one_line_too(tmp_path):
    done = run_script(
        "keras-bert-finetune", "keras_bert.tasks.finetune", "--task=mrpc", "--batch_sise=8"
    )
    assert_one_line(done, "keras-bert-finetune", "Unknown command line flag 'batch_sise'", "--help")


# === A vocabulary that does not fit the checkpoint ===


def test_vocabulary_size_differs_from_the_checkpoint(tmp_path):
    checkpoint = write_checkpoint(str(tmp_path / "uncased_L-1_H-32_A-2"))
    short = tmp_path / "short.txt"
    short.write_text("\n".join(VOCAB[:-2]) + "\n")
    (tmp_path / "in.txt").write_text("the movie\n")
    done = run_script(
        "keras-bert-extract-features",
        "keras_bert.tasks.extract_features",
        f"--input_file={tmp_path / 'in.txt'}",
        f"--output_file={tmp_path / 'out.jsonl'}",
        f"--init_checkpoint={checkpoint}",
        f"--vocab_file={short}",
    )
    assert_one_line(
        done,
        "keras-bert-extract-features",
        f"The vocabulary {short} has {len(VOCAB) - 2} tokens",
        f"the encoder of {checkpoint} has {len(VOCAB)} word-embedding rows",
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_cased_vocabulary_with_an_uncased_checkpoint(tmp_path):
    from keras_bert.checkpoints import load_init_checkpoint

    checkpoint = write_checkpoint(str(tmp_path / "uncased_L-1_H-32_A-2"))
    cased = tmp_path / "cased.txt"
    cased.write_text("\n".join(t.capitalize() if t.isalpha() else t for t in VOCAB) + "\n")
    with pytest.raises(
        ValueError,
        match=rf"The vocabulary {cased} is cased \(\d+ of its {len(VOCAB)} tokens .*"
        rf"'The'.* but the checkpoint {checkpoint} is uncased \(released Google",
    ):
        load_init_checkpoint(checkpoint, vocab_file=str(cased))
    uncased = tmp_path / "uncased.txt"
    uncased.write_text("\n".join(VOCAB) + "\n")
    assert load_init_checkpoint(checkpoint, vocab_file=str(uncased)).lower_case is True


def test_cased_tokenization_with_an_uncased_vocabulary(tmp_path):
    from keras_bert.pretraining.static_records import create_pretraining_data

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    (tmp_path / "corpus.txt").write_text("The movie was good.\n\nThe plot was bad.\n")
    with pytest.raises(
        ValueError, match=rf"lower_case=False .* the vocabulary {vocab} is uncased .* \[UNK\]"
    ):
        create_pretraining_data(
            str(tmp_path / "corpus.txt"), str(tmp_path / "out"), str(vocab), lower_case=False
        )
    assert not (tmp_path / "out").exists()


# === A batch too large for the device (simulated: the train step raises what TensorFlow raises) ===

_OOM = (
    "import tensorflow as tf\n"
    "def out_of_memory(self, *args, **kwargs):\n"
    "    raise tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating tensor with "
    "shape[8,2,32,32]')\n"
)


def test_out_of_memory_in_fine_tuning(tmp_path):
    data = write_sst2(str(tmp_path / "sst2"), n_train=16, n_dev=8, n_test=4)
    checkpoint = write_checkpoint(str(tmp_path / "uncased_L-1_H-32_A-2"))
    prelude = (
        _OOM + "from keras_bert.models.task import BertTask\nBertTask.train_step = out_of_memory"
    )
    done = run_script(
        "keras-bert-finetune",
        "keras_bert.tasks.finetune",
        "--task=sst2",
        "--do_train",
        f"--data_dir={data}",
        f"--init_checkpoint={checkpoint}",
        f"--model_dir={tmp_path / 'run'}",
        "--batch_size=8",
        "--seq_length=32",
        "--noplot",
        "--noverbose",
        prelude=prelude,
    )
    assert_one_line(
        done,
        "keras-bert-finetune",
        "Out of device memory in training with batch size 8 and sequence "
        "length 32: use a smaller batch_size",
    )


def test_out_of_memory_in_pre_training(tmp_path):
    from pretraining_data import write_records

    import keras_bert
    from keras_bert.pretraining import runner
    from keras_bert.training.memory import OutOfMemoryError

    train, _ = write_records(
        str(tmp_path), 16, vocab_size=TINY["vocab_size"], seq_length=32, max_predictions_per_seq=5
    )

    def out_of_memory(self, *args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")

    # Set on the class and then deleted: the inherited train_step comes back, and no copy of
    # it is left on BertPretrainer (test_public_api reads the class's own methods).
    keras_bert.BertPretrainer.train_step = out_of_memory
    try:
        with pytest.raises(
            OutOfMemoryError,
            match="in training with batch size 8 and sequence length 32: keep "
            "batch_size 8 .* grad_accumulation_steps 2",
        ) as info:
            runner.run_pretraining(
                train_files=train,
                model_dir=str(tmp_path / "run"),
                bert_config=keras_bert.BertConfig(**TINY),
                batch_size=8,
                seq_length=32,
                max_predictions_per_seq=5,
                num_train_steps=2,
                num_warmup_steps=0,
                checkpoint_every=2,
                verbose=False,
                plot=False,
            )
    finally:
        del keras_bert.BertPretrainer.train_step
    assert isinstance(info.value.__cause__, tf.errors.ResourceExhaustedError)


# === An optional dependency that is not installed ===

# As if the tfds extra were not installed.
_NO_TFDS = "import sys; sys.modules['tensorflow_datasets'] = None"


def test_tfds_without_its_extra_names_the_install_command(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in VOCAB))
    done = run_script(
        "keras-bert-create-pretraining-data",
        "keras_bert.pretraining.create_pretraining_data",
        "--tfds_name=wikipedia/20230601.en",
        f"--output_dir={tmp_path / 'out'}",
        f"--vocab_file={vocab}",
        prelude=_NO_TFDS,
    )
    assert_one_line(
        done,
        "keras-bert-create-pretraining-data",
        "needs tensorflow-datasets",
        "pip install 'keras3-bert[tfds]'",
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_tfds_without_its_extra_from_the_api(monkeypatch):
    from keras_bert.errors import MissingExtraError
    from keras_bert.tasks.glue import tfds_data

    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    with pytest.raises(MissingExtraError, match=r"keras3-bert\[tfds\]"):
        tfds_data.read_tfds("sst2", "dev")
