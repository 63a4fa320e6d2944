"""tf.distribute on one machine: the CPU split into logical devices, in a new process (a
TensorFlow that has started, as in the test process, cannot split its devices any more)."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def split_cpu(count):
    """Split the CPU into `count` logical devices; call before TensorFlow first uses a device."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * count
    )


def report(result):
    """In the code given to `run_on_logical_cpus`: hand `result` (JSON-serializable) back."""
    print("RESULT", json.dumps(result))


def run_on_logical_cpus(code, count=2, timeout=120):
    """Run Python `code` in a new process whose CPU is `count` logical devices.

    `code` may use `report` (already imported). Returns the reported result.
    """
    script = (
        f"import sys\nsys.path.insert(0, {HERE!r})\nfrom logical_cpus import report, split_cpu\n"
        f"split_cpu({count})\n{code}"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = [
        line.split(" ", 1)[1] for line in run.stdout.splitlines() if line.startswith("RESULT ")
    ]
    assert len(results) == 1, run.stdout[-3000:]
    return json.loads(results[0])
