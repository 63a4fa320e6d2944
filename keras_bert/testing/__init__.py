"""Support shared by the tests (tests/) and the benchmarks (bench/); the library never imports it.

- `keras_bert.testing.real_data`: where the real benchmark files and the test-only real model are.
- `keras_bert.testing.tiny_tasks`: a learnable SST-2-format task and a tiny Google checkpoint.
- `keras_bert.testing.corpus`: a generated multilingual corpus and a WordPiece vocabulary from it.
- `keras_bert.testing.keras_hub_weights`: an encoder's weights copied into keras-hub's backbone.
- `keras_bert.testing.served`: a SavedModel's answers to REST bodies from a process as bare as TF
  Serving (`serve_fresh.py`, beside it).
- `keras_bert.testing.five_lines`: the five lines on real SST-2 (fit, predict, export, serve).

Like the rest of the package, its modules import none of the extras' packages (keras-hub,
tf-models-official, the real model's: tests/test_install.py): the caller builds keras-hub's
backbone, and the real model's directory is found without importing its package.
"""
