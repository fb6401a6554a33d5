"""BFCL tasks graded by bfcl-eval's own checker: single-turn (`single`) and multi-turn (`multi`)."""
