"""Renamed public modules keep their old names for one release (CHANGELOG.md, "Deprecated"):
importing an old name warns, pointing at the importing line, and gives the new module itself."""

import importlib
import sys

import pytest

# Old module name -> (new module name, a public name both must give).
MOVED = {
    "keras_bert.training.distribute": ("keras_bert.training.strategies", "get_strategy"),
    "keras_bert.tasks.runner": ("keras_bert.tasks.finetuning", "run_finetuning"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_name_warns_and_gives_the_new_module(old, monkeypatch):
    new, name = MOVED[old]
    monkeypatch.delitem(sys.modules, old, raising=False)  # Run the old module's body again.
    package, _, leaf = old.rpartition(".")
    namespace = {}
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: it is now {new}") as record:
        # Compiled under this file's name: the warning must point at the line that imports.
        exec(compile(f"from {package} import {leaf} as module", __file__, "exec"), namespace)
    assert len(record) == 1 and record[0].filename == __file__
    module = importlib.import_module(new)
    assert namespace["module"] is module and sys.modules[old] is module
    assert getattr(namespace["module"], name) is getattr(module, name)
