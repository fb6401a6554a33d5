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


def test_the_blind_spot_probe_asks_about_commands_that_look_alike(monkeypatch):
    """benchmarks/judge_blind_spot.py: per held-out count instance, the reference and three wrong commands,
    all four with the one next state the env gives a quiet command (exit 0, no output), in the
    prompt the agent saw."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    from judge_blind_spot import COUNT_TEMPLATES, silent_commands, steps_for

    from envs.terminal.templated import generate

    tasks = [t for t in generate(240, 120, 0, split="test") if t.data["template"] in COUNT_TEMPLATES]
    assert len(tasks) >= 10
    task = tasks[0]
    cmds = silent_commands(task)
    src, out = task.instruction.split(" in ")[1].split(" to ")[0], task.instruction.split(" to ")[1].rstrip(".")
    assert cmds["reference"].startswith("wc -") and cmds["find"] == f"find {src} > {out}"
    assert cmds["echo"] == f"echo '{src}' > {out}" and len(set(cmds.values())) == 4
    steps = steps_for([task], "SYSTEM", "agent", "/app")
    assert [k for k, _ in steps] == ["reference", "find", "echo", "true"]
    assert len({(s.next_state.text, s.next_state.exit_code) for _, s in steps}) == 1
    assert steps[0][1].prompt_messages[1]["content"].startswith(task.instruction)
