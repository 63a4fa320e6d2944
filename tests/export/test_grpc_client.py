"""README's gRPC client (tensorflow-serving-api's PredictionService stub, PredictRequest with
TensorProtos) against a gRPC PredictionService answering from the exported SavedModel in this
process: the request and response formats the README shows work as written."""

from concurrent import futures

import numpy as np
import pytest
import tensorflow as tf
from export_cases import TEXTS, TEXTS_B

grpc = pytest.importorskip("grpc")
predict_pb2 = pytest.importorskip("tensorflow_serving.apis.predict_pb2")
from tensorflow_serving.apis import prediction_service_pb2_grpc  # noqa: E402


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict as TF Serving answers it: the named signature on the request's tensors."""

    def __init__(self, loaded):
        self.loaded = loaded

    def Predict(self, request, context):
        signature = self.loaded.signatures[request.model_spec.signature_name or "serving_default"]
        outputs = signature(**{k: tf.make_ndarray(v) for k, v in request.inputs.items()})
        response = predict_pb2.PredictResponse()
        response.model_spec.CopyFrom(request.model_spec)
        for name, value in outputs.items():
            response.outputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
        return response


def test_the_readme_grpc_client_gets_the_exports_answers(mnli):
    loaded = tf.saved_model.load(mnli["path"])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(loaded), server
    )
    port = server.add_insecure_port("localhost:0")
    server.start()
    try:
        # As in README.md ("gRPC (port 8500)"), with this server's port.
        stub = prediction_service_pb2_grpc.PredictionServiceStub(
            grpc.insecure_channel(f"localhost:{port}")
        )
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "mnli"
        request.model_spec.signature_name = "serving_default"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(TEXTS[:3]))
        request.inputs["text_b"].CopyFrom(tf.make_tensor_proto(TEXTS_B[:3]))
        response = stub.Predict(request, 10.0)
        got = tf.make_ndarray(response.outputs["probabilities"])
    finally:
        server.stop(None)
    want = loaded.signatures["serving_default"](
        text=tf.constant(TEXTS[:3]), text_b=tf.constant(TEXTS_B[:3])
    )["probabilities"]
    np.testing.assert_allclose(got, want.numpy(), atol=1e-6)
    assert [s.decode() for s in tf.make_ndarray(response.outputs["label"])] == [
        ["contradiction", "entailment", "neutral"][i] for i in np.argmax(got, -1)
    ]
