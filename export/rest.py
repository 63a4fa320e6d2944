"""TF Serving REST bodies <-> signature tensors, to try an export without the server.

TF Serving's predict API (`POST /v1/models/<name>[/versions/<v>]:predict`) takes JSON in one
of two formats and answers in the matching one:

- row ("instances"): `{"signature_name": "serving_default", "instances": [{"text": "a"},
  {"text": "b"}]}` (or `["a", "b"]` when the signature has one input) ->
  `{"predictions": [{"label": "1", ...}, ...]}` (or a bare list when it has one output);
- columnar ("inputs"): `{"inputs": {"text": ["a", "b"]}}` (or `{"inputs": ["a", "b"]}`) ->
  `{"outputs": {"label": ["1", "0"], ...}}` (or a bare value).

Binary strings are `{"b64": "<base64>"}` in both directions (TF Serving decodes them in
requests, and encodes outputs whose name ends in "_bytes"); other string outputs are UTF-8
text. This module imports only the standard library and NumPy, so it also runs where only
TensorFlow is installed (e.g. beside `tf.saved_model.load`, as in tests/export):

>>> loaded = tf.saved_model.load("serving/sst2/1")                        # doctest: +SKIP
>>> predict(loaded.signatures, {"instances": [{"text": "A fine film."}]})  # doctest: +SKIP
{'predictions': [{'label': '1', 'label_id': 1, 'probabilities': [0.02, 0.98]}]}
"""

import base64

import numpy as np


def predict(signatures, body):
    """Runs a REST request body on a loaded SavedModel's signatures, as TF Serving does.

    Args:
        signatures: the `.signatures` of `tf.saved_model.load(...)`.
        body: dict, the parsed JSON request.

    Returns:
        dict, the JSON response body.
    """
    name = body.get("signature_name", "serving_default")
    if name not in signatures:
        raise ValueError(
            f"Serving signature name: {name!r} not found in signature def; "
            f"signatures: {sorted(signatures)}."
        )
    function = signatures[name]
    specs = function.structured_input_signature[1]  # {name: TensorSpec}
    row_format, inputs = request_tensors(body, specs)
    outputs = {k: v.numpy() for k, v in function(**inputs).items()}
    return response_body(outputs, row_format)


def request_tensors(body, specs):
    """(row_format, {input name: NumPy array}) from a request body.

    Args:
        body: dict with "instances" (row format) or "inputs" (columnar).
        specs: dict input name -> tf.TensorSpec of the signature (dtype.as_numpy_dtype is read).

    Raises:
        ValueError: neither or both formats, missing or unknown inputs, ragged rows.
    """
    if ("instances" in body) == ("inputs" in body):
        raise ValueError(
            'A request needs exactly one of "instances" (row format) or "inputs" (columnar format).'
        )
    names = sorted(specs)
    if "instances" in body:
        instances = body["instances"]
        if not isinstance(instances, list):
            raise ValueError('"instances" must be a list.')
        if len(names) == 1 and not all(isinstance(i, dict) for i in instances):
            columns = {names[0]: instances}
        else:
            if not all(isinstance(i, dict) for i in instances):
                raise ValueError(f"Each instance must be an object with the inputs {names}.")
            extra = {k for i in instances for k in i} - set(names)
            if extra:
                raise ValueError(f"Unknown inputs {sorted(extra)}; the signature takes {names}.")
            columns = {n: [i[n] for i in instances if n in i] for n in names}
            if any(len(c) != len(instances) for c in columns.values()):
                raise ValueError(f"Every instance needs every input of {names}.")
        row_format = True
    else:
        inputs = body["inputs"]
        columns = (
            inputs if isinstance(inputs, dict) else {names[0]: inputs} if len(names) == 1 else None
        )
        if columns is None or set(columns) != set(names):
            raise ValueError(f'"inputs" must hold the inputs {names}.')
        row_format = False
    return row_format, {n: _to_array(columns[n], specs[n].dtype.as_numpy_dtype, n) for n in names}


def response_body(outputs, row_format):
    """The JSON response for `outputs` ({name: NumPy array}, batch first)."""
    values = {name: _to_json(value, name.endswith("_bytes")) for name, value in outputs.items()}
    if not row_format:
        return {"outputs": values if len(values) > 1 else next(iter(values.values()))}
    batch = len(next(iter(values.values()))) if values else 0
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    return {
        "predictions": [{name: value[i] for name, value in values.items()} for i in range(batch)]
    }


def _to_array(value, dtype, name):
    if dtype is np.object_ or dtype == np.bytes_ or np.dtype(dtype).kind in "OSU":
        array = np.array(_decode_strings(value), dtype=object)
    else:
        try:
            array = np.array(value, dtype=dtype)
        except ValueError as e:
            raise ValueError(f"Input {name}: {e} (rows must have equal lengths).") from e
    return array


def _decode_strings(value):
    if isinstance(value, list):
        return [_decode_strings(v) for v in value]
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f'Expected a string or {{"b64": ...}}, got {value!r}.')


def _to_json(value, binary):
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OS":
            return (
                [_to_json(v, binary) for v in value]
                if value.ndim
                else _to_json(value.item(), binary)
            )
        return value.tolist()
    if isinstance(value, bytes):
        return (
            {"b64": base64.b64encode(value).decode("ascii")}
            if binary
            else value.decode("utf-8", "replace")
        )
    return value
