"""Text: in-graph WordPiece tokenization (tensorflow-text), vocabularies, input packing."""
