"""Training on several hosts (JAX): two OS processes on this machine, one CPU device each,
joined by `keras.distribution.initialize` through the environment variables a user sets on
each host (KERAS_DISTRIBUTION_JOB_ADDRESSES, _NUM_PROCESSES, _PROCESS_ID; JAX's CPU
collectives are gloo over TCP). Their run equals one process over two host devices: each
host fed its half of every global batch, the gradients were summed across the hosts, and only
the chief (process 0) wrote."""

import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
from pretraining_data import write_records
from train_job import JOB, finetune_job, pretraining_job

from keras_bert.training import distribution

TESTS = os.path.dirname(JOB)
# Runs train_job.py's spec after recording, for each batch Keras hands to JAX
# (`distribute_data_input`: this process's rows of a global batch), a digest of every row;
# then writes what JAX sees of the processes and devices to `<out>.host.json`.
HOST_JOB = f"""
import hashlib, json, sys
sys.path.insert(0, {TESTS!r})
import numpy as np
from keras.src.backend.jax import distribution_lib
fed, put = [], distribution_lib.distribute_data_input

def recording(batch, layout, batch_dim_name):
    rows = np.asarray(batch).reshape(len(batch), -1)
    fed.append([hashlib.sha1(np.ascontiguousarray(r).tobytes()).hexdigest()[:16] for r in rows])
    return put(batch, layout, batch_dim_name)

distribution_lib.distribute_data_input = recording
import train_job
spec = json.loads(sys.argv[1])
train_job.main(spec)
import jax
host = dict(
    process_index=jax.process_index(),
    process_count=jax.process_count(),
    device_count=jax.device_count(),
    local_device_count=jax.local_device_count(),
    fed=fed,
)
with open(spec["out"] + ".host.json", "w") as f:
    json.dump(host, f)
"""
ENV = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONFAULTHANDLER": "1"}
TIMEOUT = 300


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _start(tmp_path, name, config, devices, **env):
    """Starts HOST_JOB on `config` with `devices` CPU devices; returns (process, out path)."""
    out = tmp_path / f"{name}.json"
    spec = dict(configs=[config], out=str(out), weights=True)
    process = subprocess.Popen(
        [sys.executable, "-c", HOST_JOB, json.dumps(spec)],
        env={
            **os.environ,
            **ENV,
            "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, out


def _finish(jobs):
    """Waits for every (process, out) of `jobs` (all are killed after TIMEOUT: a host left
    alone waits for the others forever); returns their (run result, host record)."""
    outputs = []
    try:
        for process, _ in jobs:
            outputs.append(process.communicate(timeout=TIMEOUT)[0])
    except subprocess.TimeoutExpired:
        for process, _ in jobs:
            process.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: the stacks, then exit.
        raise AssertionError(
            "hosts hung:\n" + "\n".join(p.communicate()[0][-4000:] for p, _ in jobs)
        ) from None
    results = []
    for (process, out), output in zip(jobs, outputs):
        assert process.returncode == 0, output[-6000:]
        host = json.loads(out.with_suffix(".json.host.json").read_text())
        results.append((json.loads(out.read_text())[0], host))
    return results


def _two_hosts(tmp_path, config):
    """`config` on two processes of one CPU device each, joined as two hosts; process p
    trains into `<model_dir>-p<p>` (a host that writes shows up in its own directory)."""
    address = f"localhost:{_free_port()}"
    jobs = [
        _start(
            tmp_path,
            f"host{p}",
            dict(config, model_dir=f"{config['model_dir']}-p{p}"),
            devices=1,
            KERAS_DISTRIBUTION_JOB_ADDRESSES=address,
            KERAS_DISTRIBUTION_NUM_PROCESSES="2",
            KERAS_DISTRIBUTION_PROCESS_ID=str(p),
        )
        for p in range(2)
    ]
    return _finish(jobs)


def _files(directory):
    return sorted(
        os.path.relpath(os.path.join(root, name), directory)
        for root, _, names in os.walk(directory)
        for name in names
    )


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["pretrain", "finetune"])
def test_two_hosts_train_as_one_host_with_two_devices(tmp_path, runner):
    """Pre-training (6 steps, batch 8) and fine-tuning (SST-2, 2 epochs of 3 steps, batch 16,
    evaluated each epoch), dropout on, `--distribution=data_parallel`: two hosts of one device
    follow one process of two devices step for step, to the same weights; each host fed the
    first or second half of each global batch; only process 0 wrote."""
    if runner == "pretrain":
        evaluation, _ = write_records(
            str(tmp_path),
            40,
            vocab_size=48,
            seq_length=24,
            max_predictions_per_seq=4,
            seed=1,
            prefix="eval",
        )
        config = dict(
            pretraining_job(tmp_path, "run"), distribution="data_parallel", eval_files=evaluation
        )
        written = {"checkpoint.json", "ckpt-6/variables.npz", "history.json", "summary.json"}
    else:
        config = finetune_job(tmp_path, "run", distribution="data_parallel")
        written = {"best.json", "eval_results.json", "eval_history.json", "summary.json"}
    ref_process = _start(tmp_path, "one_host", config, devices=2)
    ((ref, ref_host),) = _finish([ref_process])
    (chief, host0), (other, host1) = _two_hosts(tmp_path, config)

    # (a) Two processes, one device each, one mesh of two.
    assert [h["process_index"] for h in (host0, host1)] == [0, 1]
    for host in (host0, host1):
        assert host["process_count"] == host["device_count"] == 2
        assert host["local_device_count"] == 1
    assert ref_host["process_count"] == 1 and ref_host["local_device_count"] == 2
    assert chief["replicas"] == other["replicas"] == ref["replicas"] == 2
    # Each host fed its half of every global batch: host 0 the first rows, host 1 the rest.
    assert len(ref_host["fed"]) == len(host0["fed"]) == len(host1["fed"]) > 0
    for whole, first, second in zip(ref_host["fed"], host0["fed"], host1["fed"]):
        assert len(first) == len(second) == len(whole) // 2
        assert first + second == whole
    # (b) Only the chief wrote.
    assert _files(f"{config['model_dir']}-p1") == []
    assert written <= set(_files(f"{config['model_dir']}-p0"))
    # (c) The losses and weights of one host with two devices: gradients summed over hosts.
    losses = np.array([h["loss"] for h in ref["history"]])
    assert len(losses) == 6 and np.ptp(losses) > 1e-3  # Not constants.
    for run in (chief, other):
        assert run["steps"] == ref["steps"] == 6
        np.testing.assert_allclose(
            [h["loss"] for h in run["history"]], losses, rtol=2e-5, atol=2e-6
        )
        assert len(run["weights"]) == len(ref["weights"])
        for (path, x), (_, y) in zip(run["weights"], ref["weights"]):
            np.testing.assert_allclose(np.array(x), np.array(y), rtol=2e-5, atol=2e-6, err_msg=path)
    # Pre-training evaluates on every host (one global computation); fine-tuning on the chief.
    assert other["eval"] == (chief["eval"] if runner == "pretrain" else {}) and chief["eval"]
    assert set(chief["eval"]) == set(ref["eval"])
    for key, value in ref["eval"].items():
        np.testing.assert_allclose(chief["eval"][key], value, rtol=2e-5, atol=2e-6, err_msg=key)
    if runner == "finetune":  # The chief evaluated each epoch and the kept model as one host did.
        assert chief["eval_history"] == ref["eval_history"] and len(ref["eval_history"]) == 2
        assert chief["eval"] == ref["eval"] and chief["eval"]
        # The kept model is epoch 1's (epoch 2 is no better): the hosts' final weights above are
        # the chief's best weights, which the other host got by broadcast, not its own last.
        accuracy = [e["accuracy"] for e in ref["eval_history"]]
        assert accuracy[0] >= accuracy[1], accuracy


def test_each_host_feeds_its_contiguous_share_of_every_global_batch(monkeypatch):
    """`process_batches`: host p of P keeps rows [p*B/P, (p+1)*B/P) of each planned batch (the
    rows Keras puts on its devices) and turns Keras' own sharding off; one host keeps all."""
    import jax
    import keras

    batches = [[7, 3, 9, 1, 4, 0], [2, 8, 5, 6, 11, 10]]
    dist = distribution.KerasDistribution(
        keras.distribution.DataParallel(devices=keras.distribution.list_devices())
    )
    assert dist.process_batches(batches) == batches and dist.distribution.auto_shard_dataset
    monkeypatch.setattr(jax, "process_count", lambda: 3)
    shares = []
    for index in range(3):
        monkeypatch.setattr(jax, "process_index", lambda index=index: index)
        shares.append(dist.process_batches(batches))
    assert shares[0] == [[7, 3], [2, 8]] and shares[2] == [[4, 0], [11, 10]]
    for b, batch in enumerate(batches):
        assert [i for share in shares for i in share[b]] == batch
    assert not dist.distribution.auto_shard_dataset
    assert not distribution.several_hosts(None)  # A tf.distribute strategy's stand-in.
