"""Checkpoints in and out: original Google TF1 checkpoints and Hugging Face BERT directories."""
