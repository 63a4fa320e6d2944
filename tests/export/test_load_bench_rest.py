"""bench/bench_serving_load.py --url: its REST client (row format, strings as {"b64": ...})
driven by concurrent clients against an HTTP server answering TF Serving's REST API from the
export (keras_bert.export.rest, as keras_bert/testing/serve_fresh.py): every answer the export's."""

import http.server
import json
import threading

import bench_serving_load as bench
import numpy as np
import tensorflow as tf
from export_cases import TEXTS, TEXTS_B

from keras_bert.export import batching, rest


def test_the_rest_client_under_concurrency_gets_the_exports_answers(mnli):
    loaded = tf.saved_model.load(mnli["path"])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = json.dumps(rest.predict(loaded.signatures, body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            del args

    server = http.server.ThreadingHTTPServer(("localhost", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        call = bench.rest_peer(f"http://localhost:{server.server_port}/v1/models/mnli:predict")
        requests = bench.make_requests(list(zip(TEXTS, TEXTS_B)), 3)
        result = batching.load(call, requests, clients=4, rounds=2)
    finally:
        server.shutdown()
    assert result["failures"] == [] and len(result["answers"]) == len(requests)
    for index, outputs in result["answers"].items():
        want = loaded.signatures["serving_default"](
            text=tf.constant(requests[index]["text"]), text_b=tf.constant(requests[index]["text_b"])
        )["probabilities"]
        np.testing.assert_allclose(outputs["probabilities"], want.numpy(), atol=1e-6)
