"""The main job (`python -m keras_bert.apps.demo`, `make demo`, `keras-bert-demo`): raw text to
served answers on the Python standard library's docstrings. One module per job:

- `corpus`: the docstrings as a pre-training corpus and as paragraphs labelled by package.
- `job`: the settings, directories and stage lines the stages share.
- `pretraining`: vocabulary, masked-LM / next-sentence examples, a tiny BERT pre-trained.
- `finetuning`: the package task, fine-tuned with the task runner.
- `serving`: the SavedModel and TFLite exports, and the dev paragraphs answered through them.
- `summary`: the final table and `demo_summary.json`.
- `readme`: README.md's demo table and the fingerprint of the code under it.
- `__main__`: the command line and the job from end to end (`run`).
"""
