"""Where tests find the repository and their fixtures, wherever in tests/ they live."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
