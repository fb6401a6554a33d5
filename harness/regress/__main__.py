"""`python -m harness.regress`: the CI regression benchmark (harness/regress/cli.py)."""
import sys

from harness.regress.cli import main

sys.exit(main())
