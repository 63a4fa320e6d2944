"""Applications above the library (installed as `keras_bert.apps`): jobs built from keras_bert,
keras_bert.tasks and keras_bert.export. Nothing in those imports them (tests/test_layering.py).

- `keras_bert.apps.demo`: the main job (`make demo`, `python -m keras_bert.apps.demo`).
"""
