"""The benchmark scripts run on any clone: each answers `--help` at once (no TensorFlow loaded)
saying where its inputs come from, a missing input stops it with one line that names the path and
how to get it, `make bench` knows every bench_*.py, and no file of the package, the scripts or the
documentation names a folder of one machine.

The scripts are run as a user runs them (`python bench/<script>.py`), in parallel, with
`$KERAS_BERT_REAL_DATA` naming a folder that does not exist: nothing here reads the real data
folder beside the checkout, and the tests pass on a clone without it."""

import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

import common
import pytest

from keras_bert.testing import real_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
# bench/'s modules that are not benchmarks: the shared helpers, and the backends' worker entry.
SUPPORT = ("common.py", "backends.py")
SCRIPTS = sorted(n for n in os.listdir(BENCH) if n.endswith(".py") and n not in SUPPORT)
# Never loaded to answer --help: they take seconds to import.
HEAVY = ("tensorflow", "keras", "keras_hub", "official", "torch", "jax")
# The real data folder the scripts are told of: absent, so that no test depends on the real one.
ABSENT_DATA = os.path.join(tempfile.gettempdir(), f"keras-bert-no-real-data-{os.getpid()}")
# What the scripts' help says of the default folder (words, never opened here).
DEFAULT_WORDS = (
    "$KERAS_BERT_REAL_DATA, else " + "/".join(("..", "shared", "data")) + " beside the checkout"
)


def run_script(name, *args, cwd=ROOT, env=None, importtime=False):
    """`python bench/<name> args` -> CompletedProcess (text)."""
    command = [sys.executable, *(["-X", "importtime"] if importtime else [])]
    return subprocess.run(
        [*command, os.path.join(BENCH, name), *args],
        cwd=cwd,
        env={
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            real_data.ENVIRONMENT: ABSENT_DATA,
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def imported(stderr):
    """The top-level modules a `-X importtime` run imported."""
    return {
        line.split("|")[-1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


@pytest.fixture(scope="module")
def helps():
    """script name -> its `--help` run (all scripts at once, a few at a time)."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = pool.map(lambda n: run_script(n, "--help", importtime=True), SCRIPTS)
        return dict(zip(SCRIPTS, runs))


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 20 and "bench_serving.py" in SCRIPTS and "soak_serving.py" in SCRIPTS


def test_every_script_answers_help_without_loading_tensorflow(helps):
    for name, run in helps.items():
        assert run.returncode == 0, (name, run.stderr[-2000:])
        assert run.stdout.startswith(f"usage: {name}"), (name, run.stdout[:500])
        assert not imported(run.stderr) & set(HEAVY), (name, imported(run.stderr) & set(HEAVY))


def test_help_says_where_the_real_data_and_the_models_come_from(helps):
    """A default in the real data folder comes with where that folder is; a default model with
    the command that makes it."""
    defaults = [n for n, r in helps.items() if ABSENT_DATA in " ".join(r.stdout.split())]
    assert "bench_serving.py" in defaults  # The folder the scripts were told of, not another.
    for name, run in helps.items():
        text = " ".join(run.stdout.split())  # argparse wraps the lines.
        if ABSENT_DATA in text:
            assert DEFAULT_WORDS in text, name
        if "runs/mrpc/model" in text and "--model_dir" in text:
            assert "make bench-model, i.e. keras-bert-finetune --task=mrpc" in text, name
    for name in ("bench_serving_load.py", "bench_serving_int8.py", "bench_keras_quantize.py"):
        assert "make bench-model" in " ".join(helps[name].stdout.split()), name
    for name in ("bench_tflite_tasks.py", "bench_serving_int8_tasks.py"):
        text = " ".join(helps[name].stdout.split())
        assert "keras-bert-finetune --task=squad1" in text, name
        assert "keras-bert-finetune --task=conll2003" in text, name


def test_every_script_imports_as_a_module():
    """The scripts import one another (bench_tflite's helpers, bench_serving's keras-hub peer):
    as modules, with bench/ on the path as in a script run (setup.cfg's pythonpath). In a process
    of their own: some define absl flags on import (tf-models' create_pretraining_data) that clash
    with the command lines' flags another test of this process may have defined."""
    names = [n[:-3] for n in SCRIPTS]
    code = (
        "import importlib\n"
        f"for name in {names!r}:\n"
        "    assert importlib.import_module(name).__doc__, name\n"
        "print('imported')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": BENCH, real_data.ENVIRONMENT: ABSENT_DATA},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and "imported" in run.stdout, run.stderr[-3000:]


def one_line(run):
    """The single line a missing input stops a script with (no traceback)."""
    assert run.returncode == 1, (run.returncode, run.stdout[-1000:], run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    return lines[0]


def test_missing_real_data_stops_with_one_line(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    run = run_script("bench_serving.py", env={"KERAS_BERT_REAL_DATA": str(empty)})
    line = one_line(run)
    assert line.startswith("bench_serving.py: missing ")
    assert os.path.join(str(empty), "sst2", "dev.tsv") in line and "(--data)" in line
    assert DEFAULT_WORDS in line
    # A path given by flag is named as given.
    run = run_script("bench_squad_features.py", "--squad_file=nowhere/dev-v1.1.json")
    assert "missing nowhere/dev-v1.1.json (--squad_file)" in one_line(run)


def test_missing_model_stops_with_the_command_that_makes_it(tmp_path):
    dev = tmp_path / "dev.tsv"
    dev.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n")
    run = run_script("bench_serving_int8.py", f"--data={dev}", cwd=tmp_path)  # No runs/ here.
    line = one_line(run)
    assert line.startswith(f"bench_serving_int8.py: missing {common.MRPC_MODEL} (--model_dir)")
    assert "make bench-model, i.e. keras-bert-finetune " + " ".join(common.MRPC_FLAGS) in line
    run = run_script("bench_tflite_tasks.py", "--conll_model=nowhere/model", cwd=tmp_path)
    line = one_line(run)
    assert "missing nowhere/model (--conll_model): run keras-bert-finetune --task=conll2003" in line


def test_make_bench_knows_every_benchmark_and_makes_the_documented_model():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        makefile = f.read().replace("\\\n", " ")
    lists = {
        name: set(re.search(rf"^{name} := (.*)$", makefile, re.M).group(1).split())
        for name in ("BENCH", "BENCH_SERVING", "BENCH_BY_FLAG")
    }
    named = [b for names in lists.values() for b in names]
    assert len(named) == len(set(named))  # In one list each.
    assert {f"bench_{b}.py" for b in named} == {n for n in SCRIPTS if n.startswith("bench_")}
    recipe = re.search(r"^\$\(MRPC_MODEL\)/task\.json:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "keras-bert-finetune" in recipe
    assert all(flag in recipe.split() for flag in common.MRPC_FLAGS), recipe
    assert "MRPC_MODEL := " + common.MRPC_MODEL in makefile


# Absolute paths of one machine: its home, work and temporary folders.
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|tmp|Users|mnt)/")
CHECKED = ("bench", "keras_bert", "tasks", "export", "docs")


# The benchmarks' own results files: written on one machine, never committed (.gitignore).
UNCHECKED = (os.path.join(ROOT, "bench", "out"),)


def text_files(top):
    for directory, _, names in os.walk(os.path.join(ROOT, top)):
        if directory.startswith(UNCHECKED):
            continue
        for name in names:
            if name.endswith((".py", ".md", ".json", ".sh", ".yml", ".txt", ".ipynb")):
                yield os.path.join(directory, name)


def test_no_folder_of_one_machine_in_the_sources_and_docs():
    found = []
    for path in (p for top in CHECKED for p in text_files(top)):
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if MACHINE_PATH.search(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{number}: {line[:120]}")
    assert not found, "\n".join(found)
