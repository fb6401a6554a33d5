"""The CI regression benchmark (`python -m harness.regress`, `make regress`): `checks.py` runs each check
as a user would, `baselines.py` holds tolerances and the baselines on disk and compares with them, and
`cli.py` is the command (results/README.md)."""
