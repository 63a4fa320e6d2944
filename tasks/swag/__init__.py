"""SWAG multiple choice: `task` (reading the CSV files, `SwagTask`)."""
