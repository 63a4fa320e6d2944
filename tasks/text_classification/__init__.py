"""Classification of any label/text TSV: `task` (reading, `TextClassification`)."""
