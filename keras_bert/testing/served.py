"""A SavedModel's answers to TF Serving REST bodies from a process as bare as TF Serving:
`serve_fresh.py` (beside this module) runs with TensorFlow and tensorflow-text's op kernels only,
Keras, keras_bert and tensorflow-text's Python package blocked, so an export that needs them fails.
"""

import json
import os
import subprocess
import sys

SERVE_FRESH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_fresh.py")


def serve_fresh(saved_model, requests, workdir):
    """The REST responses of `saved_model` (a version directory) to `requests` (REST bodies).

    Args:
        saved_model: str, the SavedModel's directory.
        requests: list of REST request bodies (dicts, e.g. {"instances": [{"text": ...}]}).
        workdir: str, a folder for the answers' file.

    Returns:
        list of response bodies (dicts; {"error": ...} for a request that failed).

    Raises:
        RuntimeError: the process failed, or it imported a blocked module.
    """
    from keras_bert.export import rest

    out = os.path.join(str(workdir), "responses.json")
    spec = {"saved_model": saved_model, "rest_py": rest.__file__, "requests": requests, "out": out}
    run = subprocess.run(
        [sys.executable, SERVE_FRESH, json.dumps(spec)], capture_output=True, text=True
    )
    if run.returncode != 0:
        raise RuntimeError(f"serve_fresh.py failed:\n{run.stderr[-3000:]}")
    with open(out) as f:
        result = json.load(f)
    if result["imported"]:  # Keras, tf_keras, keras_bert or tensorflow_text's Python modules.
        raise RuntimeError(f"serving imported {result['imported']}")
    return result["responses"]
