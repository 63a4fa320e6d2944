"""TF Serving's batching as `keras_bert.export.batching` emulates and tunes it: batches form up to
max_batch_size, pad to allowed sizes and answer each request with its own rows; a full queue
fails fast; the tuner favours what it measured; batching_parameters.txt parses as TF Serving's
BatchingParameters proto (declared here from tensorflow_serving/servables/tensorflow/
session_bundle_config.proto)."""

import os
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
    wrappers_pb2,
)

from keras_bert.export import batching, export_saved_model


class Model:
    """rows -> rows * 10 on a device of 2 cores: a batch holds one for `base + per_row * B`
    seconds; records each batch size."""

    def __init__(self, base=0.0, per_row=0.0):
        self.base, self.per_row, self.sizes, self.lock = base, per_row, [], threading.Lock()
        self.cores = threading.Semaphore(2)

    def __call__(self, x):
        with self.lock:
            self.sizes.append(len(x))
        with self.cores:
            time.sleep(self.base + self.per_row * len(x))
        return {"y": x * 10}


def test_batches_fill_pad_and_answer_each_request_with_its_rows():
    model = Model(base=0.02)
    batcher = batching.Batcher(model, batching.BatchingOptions(8, 50_000, num_batch_threads=1))
    requests = [{"x": np.array([i, 100 + i])} for i in range(12)]  # 2 rows each
    result = batching.load(batcher, requests, clients=12, rounds=1)
    batcher.close()
    assert result["failures"] == [] and result["requests"] == 12
    for index, outputs in result["answers"].items():
        np.testing.assert_array_equal(outputs["y"], requests[index]["x"] * 10)
    assert set(model.sizes) <= {1, 2, 4, 8} and max(model.sizes) == 8  # Batches formed, padded.


def test_a_full_queue_fails_fast():
    options = batching.BatchingOptions(1, 0, num_batch_threads=1, max_enqueued_batches=1)
    batcher = batching.Batcher(Model(base=0.2), options)
    result = batching.load(batcher, [{"x": np.array([1])}], clients=6, rounds=1)
    batcher.close()
    assert result["failures"] and all("queue is full" in f for f in result["failures"])
    assert result["requests"] + len(result["failures"]) == 6


def test_the_tuner_favours_the_measured_best():
    """A model whose batches cost little more than single rows: batching must win; one whose cost
    grows with every row: it must not (equal throughput, lower latency unbatched)."""
    requests = [{"x": np.array([i])} for i in range(4)]
    candidates = [batching.BatchingOptions(1, 0, 2), batching.BatchingOptions(8, 1000, 2)]
    cheap, _ = batching.tune(Model(0.01, 0.0005), requests, 0.5, clients=16, candidates=candidates)
    assert cheap.max_batch_size == 8
    # Rows of 30 ms, so that thread scheduling on a loaded machine (a few ms a request, more for
    # single rows than for batches) stays small beside them; medians over 3 interleaved rounds.
    linear, table = batching.tune(
        Model(0.0, 0.03), requests, 1.0, repeat=3, clients=4, candidates=candidates
    )
    assert linear.max_batch_size == 1, table


def batching_parameters_class():
    """TF Serving's BatchingParameters message (field names and types of its .proto)."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="session_bundle_config_test.proto",
        package="tensorflow.serving",
        dependency=["google/protobuf/wrappers.proto"],
    )
    message = proto.message_type.add(name="BatchingParameters")
    for number, name in enumerate(
        ["max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads"], 1
    ):
        message.field.add(
            name=name,
            number=number,
            type=f.TYPE_MESSAGE,
            type_name=".google.protobuf.Int64Value",
            label=f.LABEL_OPTIONAL,
        )
    message.field.add(
        name="thread_pool_name",
        number=5,
        type=f.TYPE_MESSAGE,
        type_name=".google.protobuf.StringValue",
        label=f.LABEL_OPTIONAL,
    )
    message.field.add(
        name="allowed_batch_sizes", number=6, type=f.TYPE_INT64, label=f.LABEL_REPEATED
    )
    message.field.add(
        name="pad_variable_length_inputs", number=7, type=f.TYPE_BOOL, label=f.LABEL_OPTIONAL
    )
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    )


def test_tune_batching_export_writes_parameters_and_warms_up_its_batch_sizes(
    mnli, tmp_path, monkeypatch
):
    monkeypatch.setattr(batching, "TUNE_SECONDS", 0.3)
    path = export_saved_model(mnli["model_dir"], str(tmp_path / "serving"), tune_batching=True)
    with open(os.path.join(path, "assets.extra", batching.PARAMETERS_FILE)) as f:
        text = f.read()
    parameters = text_format.Parse(text, batching_parameters_class()())
    table = [line.split() for line in text.splitlines() if line[:3] == "#  "]
    assert len(table) == 1 + (len(batching.MAX_BATCH_SIZES) - 1) * len(batching.TIMEOUTS_MICROS)
    rows = {(int(r[1]), int(r[2])): float(r[3]) for r in table}
    chosen = (parameters.max_batch_size.value, parameters.batch_timeout_micros.value)
    assert rows[chosen] >= (1 - batching.SPREAD) * max(rows.values())  # The measured best.
    assert list(parameters.allowed_batch_sizes)[-1] == parameters.max_batch_size.value
    assert parameters.num_batch_threads.value == os.cpu_count()
    from test_warmup import read_records

    sizes = {len(r["text"]) for _, r in read_records(path)}
    assert sizes == set(parameters.allowed_batch_sizes) | {1}
    loaded = tf.saved_model.load(path)  # Still a servable export.
    assert loaded.signatures["serving_default"](text=tf.constant(["a"]), text_b=tf.constant(["b"]))


def test_serving_options_are_for_saved_models_only(mnli, tmp_path):
    from keras_bert.export import export

    with pytest.raises(ValueError, match="tune_batching are for format='saved_model'"):
        export(mnli["model_dir"], str(tmp_path / "hub"), format="hub", tune_batching=True)
    assert not os.path.exists(tmp_path / "hub")
