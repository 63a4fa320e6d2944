"""The paper's protocol in one command: the sweep (`keras_bert.tasks.sweep`) and the GLUE suite
(`keras_bert.tasks.glue_suite`) on tiny files in the GLUE distribution's layout with a tiny BERT.

The submission zip is checked against the GLUE server's expectations written out here, not taken
from the package: the eleven file names, the header, one row per test example with its id, and
each task's label vocabulary. The default run covers MNLI (with AX) and WNLI; `slow` runs all nine
tasks, and a suite killed mid-way that resumes with identical results.
"""

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from finetune_cases import write_checkpoint
from suite_job import run_spec
from task_cases import write_glue_tree
from test_user_errors import assert_one_line, run_script

from keras_bert.tasks import glue_suite, registry, sweep
from keras_bert.tasks.glue.data import GlueDataError

# What the GLUE server takes (gluebenchmark.com submission instructions; the GLUE baseline and
# jiant write the same): file name -> the label vocabulary (None: STS-B's score in [0, 5]).
NLI3 = {"entailment", "neutral", "contradiction"}
NLI2 = {"entailment", "not_entailment"}
SERVER_FILES = {
    "CoLA.tsv": {"0", "1"},
    "SST-2.tsv": {"0", "1"},
    "MRPC.tsv": {"0", "1"},
    "STS-B.tsv": None,
    "QQP.tsv": {"0", "1"},
    "MNLI-m.tsv": NLI3,
    "MNLI-mm.tsv": NLI3,
    "QNLI.tsv": NLI2,
    "RTE.tsv": NLI2,
    "WNLI.tsv": {"0", "1"},
    "AX.tsv": NLI3,
}
# The test file each submission file answers, relative to the GLUE root.
TEST_FILES = {
    "CoLA.tsv": "CoLA/test.tsv",
    "SST-2.tsv": "SST-2/test.tsv",
    "MRPC.tsv": "MRPC/test.tsv",
    "STS-B.tsv": "STS-B/test.tsv",
    "QQP.tsv": "QQP/test.tsv",
    "MNLI-m.tsv": "MNLI/test_matched.tsv",
    "MNLI-mm.tsv": "MNLI/test_mismatched.tsv",
    "QNLI.tsv": "QNLI/test.tsv",
    "RTE.tsv": "RTE/test.tsv",
    "WNLI.tsv": "WNLI/test.tsv",
    "AX.tsv": "diagnostic/diagnostic.tsv",
}
TINY_ROWS = dict.fromkeys(SERVER_FILES, 5)  # write_glue_tree's test files.
JOB = os.path.join(os.path.dirname(__file__), "..", "suite_job.py")


@pytest.fixture(scope="module")
def glue_root(tmp_path_factory):
    return write_glue_tree(str(tmp_path_factory.mktemp("glue") / "glue_data"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_checkpoint(str(tmp_path_factory.mktemp("suite_ckpt") / "ckpt"))


def settings(checkpoint, **kwargs):
    return dict(
        init_checkpoint=checkpoint, seq_length=32, batch_size=8, verbose=False, plot=False, **kwargs
    )


def check_zip(path, glue_root, files):
    """The zip holds exactly `files`, each as the GLUE server reads it."""
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == sorted(files)
        for name in files:
            lines = archive.read(name).decode("utf-8").splitlines()
            assert lines[0] == "index\tprediction", name
            with open(os.path.join(glue_root, TEST_FILES[name]), encoding="utf-8") as f:
                test_ids = [line.split("\t")[0] for line in f.read().splitlines()[1:]]
            rows = [line.split("\t") for line in lines[1:]]
            assert [r[0] for r in rows] == test_ids, name
            assert all(len(r) == 2 for r in rows), name
            vocabulary = SERVER_FILES[name]
            for _, prediction in rows:
                if vocabulary is None:
                    assert 0.0 <= float(prediction) <= 5.0, (name, prediction)
                else:
                    assert prediction in vocabulary, (name, prediction)


def check_markdown(model_dir):
    """Every number of results.md is results.json's (ours x100 and the paper's, 2 decimals)."""
    with open(os.path.join(model_dir, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(model_dir, "results.md")) as f:
        text = f.read()
    rows = {
        cells[0]: cells
        for cells in (
            [c.strip() for c in line.strip("|").split("|")]
            for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| task")
        )
    }
    assert sorted(rows) == sorted(c["column"] for c in results["columns"])
    for column in results["columns"]:
        cells = rows[column["column"]]
        task = results["tasks"][column["task"]]
        assert cells[1] == column["metric"]
        assert float(cells[2]) == pytest.approx(100 * task["dev"][column["metric"]], abs=0.006)
        assert float(cells[-2]) == column["paper_base_test"]
        assert float(cells[-1]) == column["paper_large_test"]
        assert int(cells[-3]) == len(task["runs"])
        if task["runs"]:
            assert float(cells[3]) == task["best_setting"]["learning_rate"]
            assert int(cells[7]) == task["best_setting"]["seed"]
    capped = re.search(r"Training sets capped \(max_train_examples\): (.*)\.", text)
    expected = [
        f"{t} {r['train_examples_used']:,} of {r['train_examples']:,}"
        for t, r in results["tasks"].items()
        if r["train_examples_used"] < r["train_examples"]
    ]
    assert (capped.group(1).split(", ") if capped else []) == expected
    kept = [c for c in results["columns"] if c["task"] != "wnli"]
    ours = np.mean([100 * results["tasks"][c["task"]]["dev"][c["metric"]] for c in kept])
    match = re.search(r"ours \(dev\) ([\d.]+); paper BERT-base \(test\) ([\d.]+)", text)
    assert float(match.group(1)) == pytest.approx(ours, abs=0.006)
    assert float(match.group(2)) == pytest.approx(
        np.mean([c["paper_base_test"] for c in kept]), abs=0.006
    )
    return results


def test_suite_sweeps_predicts_and_reports(glue_root, checkpoint, tmp_path):
    """MNLI (with AX from its model), WNLI as the majority class."""
    out = str(tmp_path / "suite")
    plan = glue_suite.plan_suite(
        glue_root,
        out,
        settings(checkpoint, max_train_examples=12),
        dict(learning_rates="1e-3", num_train_epochs="1"),
        tasks="mnli,wnli",
        test_rows=TINY_ROWS,
    )
    results = glue_suite.run_suite(plan)
    check_zip(
        os.path.join(out, "glue_submission.zip"),
        glue_root,
        ["MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv", "WNLI.tsv"],
    )
    assert check_markdown(out)["tasks"].keys() == {"mnli", "wnli"}
    assert results["tasks"]["mnli"]["train_examples_used"] == 12  # Of 16: results.md says so.
    assert os.path.getsize(os.path.join(out, "results.png")) > 1000

    # The sweep (one run here; test_the_sweep_of_a_task_outside_glue picks among two): the best by
    # dev accuracy_matched, `best` a relative link to it, its predictions in the zip.
    sweep_dir = os.path.join(out, "mnli")
    with open(os.path.join(sweep_dir, "eval_results.json")) as f:
        record = json.load(f)
    scores = {r["name"]: r["score"] for r in record["runs"]}
    assert sorted(scores) == ["lr0.001_bs8_ep1_adam_weight_decay_seed0"]
    assert record["metric"] == "accuracy_matched" and record["best"]["score"] == max(
        scores.values()
    )
    for name, score in scores.items():
        with open(os.path.join(sweep_dir, name, "eval_results.json")) as f:
            assert json.load(f)["accuracy_matched"] == score
    assert os.readlink(os.path.join(sweep_dir, "best")) == record["best_run"]
    assert results["tasks"]["mnli"]["dev"] == record["best"]["metrics"]
    # The link survives copies of the sweep directory, as a link or as the files it points at.
    for symlinks in (True, False):
        copy = str(tmp_path / f"copy-{symlinks}")
        shutil.copytree(sweep_dir, copy, symlinks=symlinks)
        best = sweep.best_run_dir(copy)
        assert os.path.realpath(best).startswith(os.path.realpath(copy))
        assert os.path.exists(os.path.join(best, "model", "task.json"))

    # WNLI: the training file's majority label everywhere.
    with open(os.path.join(glue_root, "WNLI", "train.tsv")) as f:
        labels = collections.Counter(line.split("\t")[-1] for line in f.read().splitlines()[1:])
    majority = max(sorted(labels), key=labels.get)
    with zipfile.ZipFile(os.path.join(out, "glue_submission.zip")) as archive:
        rows = archive.read("WNLI.tsv").decode().splitlines()[1:]
    assert {r.split("\t")[1] for r in rows} == {majority}

    # Run again: everything is found finished, nothing trains or predicts, the same results.
    predictions = os.path.join(sweep_dir, "best", "predictions", "MNLI-m.tsv")
    written = os.stat(predictions).st_mtime_ns
    again = glue_suite.run_suite(plan, runner=_must_not_run)
    assert again["tasks"] == results["tasks"]
    assert os.stat(predictions).st_mtime_ns == written


def _must_not_run(config):
    raise AssertionError(f"{config.model_dir} ran again")


# === Bad input: one clear error each, before anything is written ===


def test_a_missing_task_is_named_and_the_others_still_run(glue_root, checkpoint, tmp_path):
    root = str(tmp_path / "glue")
    shutil.copytree(glue_root, root)
    shutil.rmtree(os.path.join(root, "QNLI"))
    with pytest.raises(
        GlueDataError,
        match=r"GLUE task QNLI \(qnli\) is missing from .*run the others with "
        r"--tasks=cola,sst2,mrpc,stsb,qqp,mnli,rte,wnli",
    ):
        glue_suite.plan_suite(
            root, str(tmp_path / "out"), settings(checkpoint), test_rows=TINY_ROWS
        )
    assert not os.path.exists(tmp_path / "out")
    plan = glue_suite.plan_suite(
        root, str(tmp_path / "out"), settings(checkpoint), tasks="rte,wnli", test_rows=TINY_ROWS
    )
    assert plan.tasks == ("rte", "wnli")


def _rewrite(path, edit):
    with open(path) as f:
        lines = f.read().splitlines()
    with open(path, "w") as f:
        f.write("\n".join(edit(lines)) + "\n")


@pytest.mark.parametrize(
    "edit, rows, message",
    [
        (
            lambda lines: lines,
            None,
            r"RTE/test.tsv: 5 test rows, but the distributed RTE.tsv test set has 3000",
        ),
        (
            lambda lines: lines[:-1],
            TINY_ROWS,
            r"RTE/test.tsv: 4 test rows, but the distributed RTE.tsv test set has 5",
        ),
        (
            lambda lines: lines[:3] + ["7\t" + lines[3].split("\t", 1)[1]] + lines[4:],
            TINY_ROWS,
            r"row 3 has id '7', expected 2",
        ),
    ],
    ids=["official-count", "row-missing", "id-changed"],
)
def test_a_test_file_unlike_the_distributed_one(
    glue_root, checkpoint, tmp_path, edit, rows, message
):
    root = str(tmp_path / "glue")
    shutil.copytree(glue_root, root)
    _rewrite(os.path.join(root, "RTE", "test.tsv"), edit)
    with pytest.raises(GlueDataError, match=message):
        glue_suite.plan_suite(
            root, str(tmp_path / "out"), settings(checkpoint), tasks="rte", test_rows=rows
        )
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize(
    "grid, message",
    [
        (dict(learning_rates=""), "grid is empty: learning_rates lists no values"),
        (dict(seeds=" , "), "grid is empty: seeds lists no values"),
        (dict(restarts=0), "grid is empty: restarts must be >= 1"),
        (dict(optimizers="adam"), "'adam' is not one of"),
        (dict(seeds="1", restarts=2), "seeds or restarts, not both"),
    ],
)
def test_a_bad_grid(glue_root, checkpoint, tmp_path, grid, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        glue_suite.plan_suite(
            glue_root,
            str(tmp_path / "out"),
            settings(checkpoint),
            grid,
            tasks="rte",
            test_rows=TINY_ROWS,
        )


def test_command_line_errors_are_one_line(glue_root, checkpoint, tmp_path):
    done = run_script(
        "keras-bert-finetune",
        "keras_bert.tasks.finetune",
        "--task=rte",
        f"--data_dir={glue_root}/RTE",
        f"--init_checkpoint={checkpoint}",
        f"--model_dir={tmp_path}/rte",
        "--do_train",
        "--sweep",
        "--learning_rates=",
    )
    assert_one_line(
        done, "keras-bert-finetune", "The sweep's grid is empty: learning_rates lists no values."
    )
    shutil.rmtree(os.path.join(glue_root, "..", "no_sst2"), ignore_errors=True)
    root = shutil.copytree(glue_root, os.path.join(glue_root, "..", "no_sst2"))
    shutil.rmtree(os.path.join(root, "SST-2"))
    done = run_script(
        "keras-bert-glue",
        "keras_bert.tasks.glue_suite",
        f"--data_dir={root}",
        f"--init_checkpoint={checkpoint}",
        f"--model_dir={tmp_path}/suite",
    )
    assert_one_line(done, "keras-bert-glue", "GLUE task SST-2 (sst2) is missing from")
    assert not os.path.exists(tmp_path / "rte") and not os.path.exists(tmp_path / "suite")


# === Slow: all nine tasks, and a killed suite resumed ===


@pytest.mark.slow
def test_all_nine_tasks_and_ax_make_the_server_zip(glue_root, checkpoint, tmp_path):
    out = str(tmp_path / "suite")
    plan = glue_suite.plan_suite(
        glue_root,
        out,
        settings(checkpoint),
        dict(learning_rates="1e-3", num_train_epochs="1"),
        test_rows=TINY_ROWS,
    )
    results = glue_suite.run_suite(plan)
    check_zip(results["submission"], glue_root, list(SERVER_FILES))
    assert check_markdown(out)["average_without_wnli"]["columns"] == [
        "MNLI-m",
        "MNLI-mm",
        "QQP",
        "QNLI",
        "SST-2",
        "CoLA",
        "STS-B",
        "MRPC",
        "RTE",
    ]


_CALLS = []


def _counting(config):
    from keras_bert.tasks.finetuning import run_finetuning

    _CALLS.append(config)
    return run_finetuning(config)


def suite_spec(glue_root, checkpoint, out, **extra):
    """suite_job.py's plan: RTE and MRPC, two seeds each, 2 epochs of 2 steps, a checkpoint per
    step."""
    return dict(
        data_dir=glue_root,
        model_dir=out,
        settings=settings(checkpoint, steps_per_loop=1, checkpoint_every=1),
        grid=dict(learning_rates="1e-3", num_train_epochs="2", seeds="0,1"),
        tasks="rte,mrpc",
        test_rows=TINY_ROWS,
        **extra,
    )


@pytest.mark.slow
def test_a_killed_suite_resumes_with_identical_results(glue_root, checkpoint, tmp_path):
    full = run_spec(suite_spec(glue_root, checkpoint, str(tmp_path / "full")))
    killed = suite_spec(glue_root, checkpoint, str(tmp_path / "killed"))
    # SIGKILL right after the checkpoint of step 3 (mid-epoch 2) of the suite's third run: the
    # first of RTE (the tasks run in GLUE's order: MRPC first).
    done = subprocess.run(
        [sys.executable, JOB, json.dumps(dict(killed, kill_in_run=3, kill_after_step=3))],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]

    def finished(task):
        folder = os.path.join(killed["model_dir"], task)
        return sorted(
            n
            for n in os.listdir(folder)
            if n.startswith("lr") and os.path.exists(os.path.join(folder, n, "sweep_run.json"))
        )

    assert len(finished("mrpc")) == 2 and finished("rte") == []
    resumed = run_spec(killed, runner=_counting)
    # MRPC's finished runs were kept; RTE's first run resumed from its checkpoint of step 3.
    assert [c.model_dir.split(os.sep)[-2:] for c in _CALLS] == [
        ["rte", "lr0.001_bs8_ep2_adam_weight_decay_seed0"],
        ["rte", "lr0.001_bs8_ep2_adam_weight_decay_seed1"],
    ]
    rte = os.path.join(killed["model_dir"], "rte", "lr0.001_bs8_ep2_adam_weight_decay_seed0")
    with open(os.path.join(rte, "summary.json")) as f:
        assert json.load(f)["start_step"] == 3
    for task in ("rte", "mrpc"):
        assert resumed["tasks"][task]["runs"] == full["tasks"][task]["runs"]
        assert resumed["tasks"][task]["dev"] == pytest.approx(full["tasks"][task]["dev"], rel=1e-6)
    with zipfile.ZipFile(full["submission"]) as a, zipfile.ZipFile(resumed["submission"]) as b:
        assert {n: a.read(n) for n in a.namelist()} == {n: b.read(n) for n in b.namelist()}


# === The sweep on every task of the registry ===


def _sweep_task(task, checkpoint, tmp_path, seeds):
    from task_cases import task_options, write_task_data

    from keras_bert.tasks.config import FinetuneConfig

    config = FinetuneConfig(
        task=task,
        data_dir=write_task_data(str(tmp_path / "data"), task),
        model_dir=str(tmp_path / "sweep"),
        do_train=True,
        do_eval=True,
        task_options=task_options(task),
        **settings(checkpoint, num_train_epochs=1),
    )
    results = sweep.run_sweep(config, sweep.make_grid(config, learning_rates="1e-3", seeds=seeds))
    metric = config.task_object.main_metric
    assert results["metric"] == metric and len(results["runs"]) == len(seeds.split(","))
    assert results["best"]["score"] == max(r["metrics"][metric] for r in results["runs"])
    assert results["seeds"]["count"] == len(results["runs"])
    with open(os.path.join(sweep.best_run_dir(config.model_dir), "eval_results.json")) as f:
        assert json.load(f)[metric] == results["best"]["score"]
    return results


def test_the_sweep_of_a_task_outside_glue(checkpoint, tmp_path):
    """NER's sweep: two restarts, the best by dev F1 (its main metric)."""
    results = _sweep_task("conll2003", checkpoint, tmp_path, "0,1")
    assert results["seeds"]["min"] <= results["best"]["score"] == results["seeds"]["max"]


@pytest.mark.slow
@pytest.mark.parametrize("task", registry.task_names())
def test_the_sweep_of_every_task(task, checkpoint, tmp_path):
    _sweep_task(task, checkpoint, tmp_path, "3")
