"""The progress bar: log records written while it is shown never land inside its line, in a
file or pipe (the bar's line ends first) or a terminal (the bar is erased and redrawn below);
a real pre-training command line, its stdout and stderr in one pipe as on a terminal, shows
its step lines whole, above the bar."""

import io
import logging
import re
import subprocess
import sys
import warnings

from pretraining_data import write_records

import keras_bert
from keras_bert.training.progress import ProgressBar

BAR = re.compile(r"\d+/\d+ \[[=>.]+\]")
ABSL_RECORD = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")  # absl's prefix: I1123 13:38:22.767793 ...


class _Screen(io.StringIO):
    """One stream standing for a terminal (or a pipe) that stdout and stderr share."""

    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def _logger_on(screen):
    logger = logging.getLogger("test_progress")
    logger.handlers = [logging.StreamHandler(screen)]
    logger.propagate, logger.level = False, logging.INFO
    return logger


def test_log_records_are_whole_lines_beside_the_bar_in_a_file():
    screen = _Screen(tty=False)
    logger = _logger_on(screen)
    bar = ProgressBar(4, stream=screen)
    bar.update(1, [("loss", 1.5)])
    logger.info("step 1 logged")
    bar.update(2, [("loss", 1.25)])
    bar.update(3, [("loss", 1.0)])
    logger.warning("between steps")
    bar.update(4, [("loss", 0.5)])
    logger.info("after the bar")
    lines = screen.getvalue().split("\n")
    assert "step 1 logged" in lines and "between steps" in lines and "after the bar" in lines
    for line in lines:  # Every line is the bar's (its \r-separated redraws) or one log record.
        assert not (
            BAR.search(line) and ("logged" in line or "between" in line or "after" in line)
        ), line
    assert lines[-3].split("\r")[-1].startswith("4/4 [====================]")
    assert (
        not bar.is_open and not logger.handlers[0].filters
    )  # Closed at the target: nothing left behind.


def test_a_training_log_stopped_early_closes_its_bar(monkeypatch):
    # A fit that raises never reaches the last step; the runners close the log in `finally`.
    from keras_bert.training import callbacks

    screen = _Screen(tty=True)
    logger = _logger_on(screen)
    monkeypatch.setattr(sys, "stdout", screen)
    log = callbacks.TrainingLog(10, 4, verbose=True)
    log.progbar.update(3, [("loss", 1.0)])
    assert log.progbar.is_open and logger.handlers[0].filters
    log.close()
    assert not log.progbar.is_open and not logger.handlers[0].filters
    logger.info("after the failure")
    assert screen.getvalue().endswith("after the failure\n")  # No bar redrawn under it.


def test_warnings_are_whole_lines_too():
    screen = _Screen(tty=False)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, *args, **kwargs: screen.write(
            f"{category.__name__}: {message}\n"
        )
        bar = ProgressBar(2, stream=screen)
        bar.update(1)
        warnings.warn("careful", stacklevel=1)
        bar.update(2)
        warnings.warn("after", stacklevel=1)
    assert screen.getvalue().split("\n")[1:4] == [
        "UserWarning: careful",
        "\r2/2 [====================] 0s",
        "UserWarning: after",
    ]


def test_in_a_terminal_the_bar_is_erased_and_redrawn_below_a_record(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # Lines are cut to the terminal's width.
    screen = _Screen(tty=True)
    logger = _logger_on(screen)
    bar = ProgressBar(10, stream=screen)
    bar.update(5, [("loss", 0.25)])
    logger.info("a record")
    out = screen.getvalue()
    first = "\r 5/10 [==========>.........] ETA ? - loss 0.25\x1b[K"
    assert out == first + "\r\x1b[K" + "a record\n" + first
    bar.close()
    assert screen.getvalue().endswith("\n") and not bar.is_open


def test_pretraining_command_line_keeps_log_lines_out_of_the_bar(tmp_path):
    config = keras_bert.BertConfig(
        vocab_size=48,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=24,
    )
    config.to_json_file(str(tmp_path / "bert_config.json"))
    train, _ = write_records(
        str(tmp_path), 64, vocab_size=48, seq_length=24, max_predictions_per_seq=4
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_bert.pretraining.pretrain",
            f"--bert_config_file={tmp_path}/bert_config.json",
            f"--train_files={train}",
            f"--model_dir={tmp_path}/run",
            "--batch_size=8",
            "--seq_length=24",
            "--max_predictions_per_seq=4",
            "--num_train_steps=6",
            "--num_warmup_steps=1",
            "--steps_per_loop=2",
            "--checkpoint_every=2",
            "--noplot",
            "--verbosity=0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )  # One pipe, as a terminal.
    assert run.returncode == 0, run.stdout[-3000:]
    lines = run.stdout.split("\n")
    bar_lines = [line for line in lines if BAR.search(line)]
    step_lines = [line for line in lines if re.search(r"callbacks\.py:\d+\] step \d+: loss", line)]
    assert [re.search(r"step (\d+):", line).group(1) for line in step_lines] == ["2", "4", "6"]
    assert all(
        ABSL_RECORD.match(line) for line in step_lines
    )  # Whole lines, from their first character.
    assert bar_lines and bar_lines[-1].split("\r")[-1].startswith("6/6 [====================]")
    for line in bar_lines:
        assert not ABSL_RECORD.search(line) and "step 2:" not in line, line
