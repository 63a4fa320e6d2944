"""The command lines: flags shared in one process, start-up without TensorFlow (`import keras_bert`,
--help), public names, and errors a user can fix reported in one line."""

import configparser
import os
import re
import subprocess
import sys

import pytest
from absl import flags


def test_command_lines_share_one_process():
    import dataclasses

    from keras_bert.apps.demo import __main__ as demo
    from keras_bert.pretraining import create_pretraining_data, pretrain
    from keras_bert.text import build_vocab

    build_vocab.define_flags()  # --vocab_size 30000
    create_pretraining_data.define_flags()  # --seed 12345
    pretrain.define_flags()  # --seed, --vocab_size, --model_dir of its own
    assert flags.FLAGS["vocab_size"].default is None
    demo.define_flags()  # --model_dir runs/demo
    assert flags.FLAGS["model_dir"].default == "runs/demo"
    pretrain.define_flags()  # Defining again takes its own defaults back.
    assert flags.FLAGS["model_dir"].default is None
    defaults = {f.name: f.default for f in dataclasses.fields(pretrain.PretrainingConfig)}
    assert flags.FLAGS["seed"].default == defaults["seed"]


def test_every_command_line_has_a_console_entry_point():
    """setup.cfg's console scripts resolve to each command line's `console_main` (installed or
    not)."""
    import configparser
    import importlib
    import os

    parser = configparser.ConfigParser()
    parser.read(os.path.join(os.path.dirname(__file__), "..", "setup.cfg"))
    scripts = dict(
        line.split(" = ")
        for line in parser["options.entry_points"]["console_scripts"].split("\n")
        if line
    )
    assert {
        "keras-bert-pretrain",
        "keras-bert-finetune",
        "keras-bert-distill",
        "keras-bert-export",
        "keras-bert-extract-features",
        "keras-bert-create-pretraining-data",
        "keras-bert-build-vocab",
        "keras-bert-demo",
    } <= set(scripts)
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target


# === Start-up: `import keras_bert` and every --help run without TensorFlow ===

ROOT = os.path.join(os.path.dirname(__file__), "..")
_HEAVY = re.compile(
    r"\|\s+(tensorflow|keras)$", re.MULTILINE
)  # -X importtime lines of those imports.


def _console_scripts():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    lines = parser["options.entry_points"]["console_scripts"].split("\n")
    return dict(line.split(" = ") for line in lines if line)


def _python(*args, env=None):
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ, **(env or {})),
    )


def test_import_keras_bert_does_not_import_tensorflow():
    done = _python(
        "-c",
        "import keras_bert, sys; assert not {'tensorflow', 'keras'} & set(sys.modules), "
        "sorted(m for m in sys.modules if m.startswith(('tensorflow', 'keras')))[:5]",
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_top_level_names_resolve_to_their_objects():
    import keras_bert
    from keras_bert.models import task_models
    from keras_bert.text import preprocessor, tokenizer

    expected = {
        "BertTokenizer": tokenizer.BertTokenizer,
        "BertPreprocessor": preprocessor.BertPreprocessor,
        "BertClassifier": task_models.BertClassifier,
        "BertSpanLabeler": task_models.BertSpanLabeler,
        "BertTokenClassifier": task_models.BertTokenClassifier,
        "BertMultipleChoice": task_models.BertMultipleChoice,
    }
    for name, value in expected.items():
        assert getattr(keras_bert, name) is value
    assert (
        keras_bert.BertEncoder.__name__ == "BertEncoder"
        and keras_bert.BertConfig.__name__ == "BertConfig"
    )
    assert keras_bert.tasks.__name__ == "keras_bert.tasks" and callable(keras_bert.export.export)
    assert keras_bert.checkpoints.load_encoder
    assert set(keras_bert.__all__) <= set(dir(keras_bert)) and "BertTokenizer" in keras_bert.__all__
    with pytest.raises(AttributeError, match="BertTokeniser"):
        keras_bert.BertTokeniser  # noqa: B018


def test_command_line_modules_keep_their_library_names():
    from keras_bert.pretraining import create_pretraining_data, static_records
    from keras_bert.tasks import finetune, finetuning

    assert finetune.run_finetuning is finetuning.run_finetuning
    assert finetune.predict is finetuning.predict
    assert create_pretraining_data.create_pretraining_data is static_records.create_pretraining_data
    assert "run_finetuning" in dir(finetune)


@pytest.mark.parametrize("script, target", sorted(_console_scripts().items()))
def test_help_exits_0_prints_the_description_and_skips_tensorflow(script, target):
    """Each console script's --help, run as installed (`console_main` under its script name) and
    as `python -m`, exits 0 with the module's description and its flags, without TensorFlow."""
    module, function = target.split(":")
    description = __import__("importlib").import_module(module).__doc__.strip().splitlines()[0]
    as_script = (
        f"import sys; sys.argv[0] = {script!r}; from {module} import {function}; "
        f"sys.exit({function}())"
    )
    for args in (("-c", as_script, "--help"), ("-m", module.removesuffix(".__main__"), "--help")):
        done = _python("-X", "importtime", *args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert description in done.stdout and "flags:" in done.stdout, done.stdout[:500]
        assert not _HEAVY.search(done.stderr), (args, _HEAVY.findall(done.stderr))
    assert _python("-m", module.removesuffix(".__main__"), "-h").returncode == 0


# === One-line errors ===


def test_user_errors_are_one_line_with_status_2(capsys):
    from keras_bert import cli
    from keras_bert.tasks import registry

    def task_typo(argv):
        registry.get_task("mrcp")  # A ValueError of keras_bert's own checks.

    with pytest.raises(SystemExit) as exit_info:
        cli._reporting_errors(task_typo)([])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ": error: Unknown task 'mrcp'. Did you mean 'mrpc'?" in err

    def usage(argv):
        raise cli.UsageError("give exactly one of --a and --b.")

    with pytest.raises(SystemExit):
        cli._reporting_errors(usage)([])
    assert capsys.readouterr().err.endswith(": error: give exactly one of --a and --b.\n")


def test_unexpected_errors_keep_their_traceback():
    import numpy as np

    from keras_bert import cli

    def library_bug(argv):
        np.reshape(np.zeros(3), (2, 2))  # A ValueError raised by NumPy, not by a keras_bert check.

    with pytest.raises(ValueError, match="reshape"):
        cli._reporting_errors(library_bug)([])
    with pytest.raises(KeyError):
        cli._reporting_errors(lambda argv: {}["x"])([])


# === TensorFlow's start-up lines ===

_QUIET_START = """
import os, sys
from keras_bert import cli
os.write(2, b"before\\n")
with cli.dropping_stderr_lines(b"drop me"):
    os.write(2, b"kept 1\\nplease drop me\\nkept 2\\n")
cli.start_tensorflow()
import tensorflow as tf
tf.constant(1.0) + 1.0  # Runs an op: the devices exist already.
os.write(2, b"after\\n")
assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"  # Errors still print: the level is unchanged.
"""


def test_start_tensorflow_drops_only_the_cuinit_line():
    """On a machine without an NVIDIA driver the command lines start TensorFlow without its
    `failed call to cuInit` error line; other lines written meanwhile are kept, in order."""
    from keras_bert import cli

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", _QUIET_START], capture_output=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stderr.decode().splitlines()
    assert lines[:3] == ["before", "kept 1", "kept 2"], lines
    assert lines[-1] == "after"
    if not cli.has_nvidia_driver():
        assert not any("cuInit" in line for line in lines), lines
    # Without the filter TensorFlow does print it here (else this test would prove nothing).
    bare = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; tf.constant(1)"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    if not cli.has_nvidia_driver():
        assert b"cuInit" in bare.stderr


def test_a_command_line_prints_no_cuinit_line(tmp_path):
    """A real command (absl's app.run, where TensorFlow already initializes its devices while it is
    imported) on a machine without an NVIDIA driver: its output has no cuInit line."""
    from keras_bert import cli

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world\nthe quick brown fox\n\nanother document here\n")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_bert.text.build_vocab",
            f"--input={corpus}",
            "--vocab_size=50",
            f"--output={tmp_path / 'vocab.txt'}",
        ],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert (tmp_path / "vocab.txt").exists()
    if not cli.has_nvidia_driver():
        assert b"cuInit" not in done.stderr, done.stderr.decode()[-2000:]


def test_import_keras_bert_sets_no_backend_and_imports_no_keras():
    """`import keras_bert` leaves the backend to KERAS_BACKEND (the command lines default to
    TensorFlow): it sets nothing and imports neither Keras nor TensorFlow."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    code = (
        "import os, sys; import keras_bert; "
        "assert 'KERAS_BACKEND' not in os.environ, os.environ['KERAS_BACKEND']; "
        "assert 'keras' not in sys.modules and 'tensorflow' not in sys.modules; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
