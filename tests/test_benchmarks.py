"""Every benchmark script imports: a refactor that moves a function a benchmark uses breaks the
benchmark only when someone next runs it (often on a GPU machine, with little time), so the import is
checked here, where it costs nothing. (What the benchmarks measure is for their own runs, not tests.)"""
import importlib.util
import sys
from pathlib import Path

import pytest

from nextstate.config import REPO_ROOT

BENCHMARKS = sorted((REPO_ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.stem)
def test_benchmark_imports(path: Path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parent))  # as `python benchmarks/x.py` runs it: siblings import
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
