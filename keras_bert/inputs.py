"""The encoder's input names, the TF BERT convention shared by text packing (which makes them),
the models (which read them) and the exports (which declare them)."""

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
