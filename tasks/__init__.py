"""Task heads and benchmark runners (installed as keras_bert.tasks)."""
