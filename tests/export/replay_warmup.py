"""Replays the warmup records of SavedModels as TF Serving does at load, in a process as bare as
TF Serving (the `bare_tensorflow` of keras_bert/testing/serve_fresh.py, loaded from its file:
TensorFlow and tensorflow-text's op kernels; keras, keras_bert and tensorflow-text's Python package
blocked). Records are parsed with tensorflow-serving-api's PredictionLog (protos only).

    python replay_warmup.py '<json>'   with keys saved_models (list of paths), out (an .npz)

The .npz holds `<model index>/<record index>/<output name>` arrays and `imported`, the blocked
packages that were imported anyway.
"""

import importlib.util
import json
import os
import sys

# Loaded from its file: importing it through the keras_bert package would import keras_bert.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SERVE_FRESH = os.path.join(_ROOT, "keras_bert", "testing", "serve_fresh.py")
_spec = importlib.util.spec_from_file_location("serve_fresh", _SERVE_FRESH)
serve_fresh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve_fresh)
bare_tensorflow, imported_blocked = serve_fresh.bare_tensorflow, serve_fresh.imported_blocked


def main(spec):
    tf = bare_tensorflow()
    from tensorflow_serving.apis import prediction_log_pb2

    arrays = {}
    for m, path in enumerate(spec["saved_models"]):
        loaded = tf.saved_model.load(path)
        records = tf.data.TFRecordDataset(
            os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
        )
        for r, record in enumerate(records):
            request = prediction_log_pb2.PredictionLog.FromString(
                record.numpy()
            ).predict_log.request
            signature = loaded.signatures[request.model_spec.signature_name or "serving_default"]
            outputs = signature(
                **{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
            )
            for name, value in outputs.items():
                arrays[f"{m}/{r}/{name}"] = value.numpy()
    import numpy as np

    np.savez(spec["out"], imported=np.array(imported_blocked(), dtype=object), **arrays)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
