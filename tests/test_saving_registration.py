"""`keras.saving.load_model` after a plain `import keras_bert` (keras_bert._saving): a fresh
process that imports keras_bert (no Keras yet), then Keras, loads a saved task model with its
preprocessor and the same logits; the stand-ins' table covers every class the source registers."""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np

import keras_bert
from keras_bert import _saving
from keras_bert.models.task_models import BertClassifier

PAIRS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoints", "hf_tasks", "pairs")
_REGISTERED = re.compile(r"register_keras_serializable\(package=\"keras_bert\"\)")


def _registering_modules():
    """The modules of keras_bert (tasks and export included) whose source registers a class."""
    roots = {"keras_bert": keras_bert.__path__[0]}
    roots.update(
        {f"keras_bert.{p}": getattr(keras_bert, p).__path__[0] for p in ("tasks", "export")}
    )
    found = set()
    for package, root in roots.items():
        for directory, _, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                if not name.endswith(".py") or not _REGISTERED.search(_read(path)):
                    continue
                parts = os.path.relpath(path, root)[: -len(".py")].split(os.sep)
                found.add(".".join([package, *parts]))
    return found


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_stand_ins_cover_every_registered_class():
    """Each class the source registers has its stand-in under its module; a stand-in resolves to
    the class and builds the object from its config."""
    import importlib

    modules = _registering_modules()
    assert modules == set(_saving.MODULES)
    registered = keras.saving.get_custom_objects()
    for module in modules:
        importlib.import_module(module)
    ours = {k: v for k, v in registered.items() if k.startswith("keras_bert>")}
    table = {f"keras_bert>{n}": m for m, names in _saving.MODULES.items() for n in names}
    assert set(ours) == set(table)
    assert all(cls.__module__ == table[key] for key, cls in ours.items())
    stand_ins = {}
    _saving.add_stand_ins(stand_ins)
    assert stand_ins["keras_bert>BertClassifier"].resolve() is BertClassifier


def test_load_model_after_a_plain_import(tmp_path):
    model = BertClassifier.from_preset(PAIRS, seq_length=16, text_pair=True)
    model.save(str(tmp_path / "m.keras"))
    ids = model.preprocessor((np.array(["John lives in Paris"]), np.array(["the movie"])))
    ids = {k: np.asarray(v) for k, v in ids.items()}
    np.savez(tmp_path / "ids.npz", **ids)
    code = f"""
import sys, json
import numpy as np
import keras_bert
assert "keras" not in sys.modules and "tensorflow" not in sys.modules
import keras
model = keras.saving.load_model({str(tmp_path / "m.keras")!r})
logits = model(dict(np.load({str(tmp_path / "ids.npz")!r})))["logits"]
print(json.dumps({{"class": type(model).__name__, "facts": model.task_facts,
    "vocabulary": model.preprocessor.tokenizer.vocabulary, "logits": np.asarray(logits).tolist()}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["class"] == "BertClassifier" and got["facts"] == model.task_facts
    assert got["vocabulary"] == model.preprocessor.tokenizer.vocabulary
    np.testing.assert_allclose(got["logits"], model(ids)["logits"].numpy(), atol=1e-6)
