"""Answers TF Serving REST bodies from a SavedModel in a process as bare as TF Serving.

TF Serving has no Python: it runs TensorFlow's kernels and the tensorflow-text op kernels it
links. This process imports TensorFlow only and loads tensorflow-text's op libraries (the
`.so` files beside its Python package, as `tf.load_op_library`); Keras, tf_keras, keras_bert,
keras_hub and tensorflow-text's Python package (which imports tf.keras) are blocked, so any
need for them fails the load. Request bodies become tensors through keras_bert/export/rest.py,
loaded from its file (it imports only the standard library and NumPy).

    python serve_fresh.py '<json>'   with keys saved_model, rest_py, requests, out
"""

import glob
import importlib.util
import json
import os
import sys

BLOCKED = (
    "keras",
    "tf_keras",
    "keras_bert",
    "keras_hub",
    "keras_nlp",
    "tensorflow_text",
    "tensorflow_hub",
)


def bare_tensorflow():
    """Blocks BLOCKED, imports TensorFlow and loads tensorflow-text's op kernels; returns tf."""
    text_ops = os.path.join(
        importlib.util.find_spec("tensorflow_text").submodule_search_locations[0], "python", "ops"
    )
    for name in BLOCKED:
        sys.modules[name] = None  # `import name` raises ImportError from here on.
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import tensorflow as tf

    for library in sorted(glob.glob(os.path.join(text_ops, "_*.so"))):
        tf.load_op_library(library)
    return tf


def imported_blocked():
    """The BLOCKED packages imported so far (none, unless the block failed)."""
    return sorted(
        {
            k.split(".")[0]
            for k, v in sys.modules.items()
            if v is not None and k.split(".")[0] in BLOCKED
        }
    )


def main(spec):
    tf = bare_tensorflow()
    rest_spec = importlib.util.spec_from_file_location("rest", spec["rest_py"])
    rest = importlib.util.module_from_spec(rest_spec)
    rest_spec.loader.exec_module(rest)

    loaded = tf.saved_model.load(spec["saved_model"])
    responses = []
    for body in spec["requests"]:
        try:
            responses.append(rest.predict(loaded.signatures, body))
        except Exception as e:  # noqa: BLE001 -- reported to the test as TF Serving reports errors.
            responses.append({"error": f"{type(e).__name__}: {e}"})
    with open(spec["out"], "w") as f:
        json.dump({"responses": responses, "imported": imported_blocked()}, f)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
