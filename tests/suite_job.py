"""The GLUE suite in its own process, for the kill/resume test.

Usage: python suite_job.py '<json>' with `data_dir`, `model_dir`, `settings`, `grid`, `tasks`,
`test_rows` (`glue_suite.plan_suite`'s arguments) and optional `kill_in_run` and `kill_after_step`
(SIGKILL this process right after the checkpoint of that step of the suite's n-th training run,
as a preemption would).
"""

import json
import os
import signal
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def run_spec(spec, runner=None):
    """Plans and runs the suite of `spec` in this process; returns its results."""
    from keras_bert.tasks import glue_suite

    plan = glue_suite.plan_suite(
        spec["data_dir"],
        spec["model_dir"],
        spec["settings"],
        spec["grid"],
        tasks=spec["tasks"],
        test_rows=spec["test_rows"],
    )
    return glue_suite.run_suite(plan, runner=runner)


def main(spec):
    from keras_bert.tasks.finetuning import run_finetuning
    from keras_bert.training import callbacks

    calls = [0]

    def counting(config):
        calls[0] += 1
        return run_finetuning(config)

    save = callbacks.PeriodicCheckpoint.on_epoch_end

    def save_then_die(self, epoch, logs=None):
        save(self, epoch, logs)
        step = int(self.model.optimizer.iterations.numpy())
        if calls[0] == spec.get("kill_in_run") and step >= spec.get("kill_after_step", 1):
            os.kill(os.getpid(), signal.SIGKILL)

    callbacks.PeriodicCheckpoint.on_epoch_end = save_then_die
    run_spec(spec, runner=counting)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
