"""Export to SavedModel, TF Hub-style pairs and TFLite (installed as keras_bert.export)."""
