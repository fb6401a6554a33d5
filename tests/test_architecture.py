"""The layers of docs/architecture.md, checked on the source: imports point one way (down), and no two
modules import each other through any chain (lazy imports inside functions count: they hide cycles, they
don't remove them)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each package may import its own modules and any package of a lower rank; envs and agents are peers
# that know nothing of each other.
RANK = {"nextstate": 0, "envs": 1, "agents": 1, "trainers": 2, "harness": 3}


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in RANK:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if "tasks" in rel.parts or "images" in rel.parts:
                continue  # task data: graders that run inside sandboxes
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file, resolved to the deepest module known."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_imports_only_point_down_the_layers(graph):
    upward = []
    for name, targets in graph.items():
        here = name.split(".")[0]
        for target in targets:
            there = target.split(".")[0]
            if there != here and RANK[there] >= RANK[here]:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports against the layers (docs/architecture.md):\n" + "\n".join(sorted(upward))


def test_the_ground_imports_nothing_of_the_project(graph):
    assert {t for name, ts in graph.items() if name.startswith("nextstate") for t in ts
            if not t.startswith("nextstate")} == set()


def test_no_module_import_cycles(graph):
    # Package __init__ files are skipped: importing envs.x runs envs/__init__ by Python's rules,
    # which is not a dependency the code chose.
    edges = {n: {t for t in ts if not (n.startswith(t + ".") or t == n)} for n, ts in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checker_sees_a_planted_upward_import_and_cycle(tmp_path):
    """The checks above can fail: a fake tree with an envs -> trainers import and a two-module cycle."""
    fake = {"envs.a": tmp_path / "a.py", "trainers.b": tmp_path / "b.py"}
    fake["envs.a"].write_text("from trainers.b import x\n")
    fake["trainers.b"].write_text("def f():\n    from envs import a\n")
    graph = {name: imports_of(name, path, fake) for name, path in fake.items()}
    assert graph == {"envs.a": {"trainers.b"}, "trainers.b": {"envs.a"}}
    with pytest.raises(AssertionError, match="envs.a -> trainers.b"):
        test_imports_only_point_down_the_layers(graph)
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_module_import_cycles(graph)


def test_envs_never_touch_hydra():
    """Envs take typed configs (or read their conf/ defaults as plain YAML): Hydra belongs to the app."""
    touching = []
    for name, path in project_modules().items():
        if name.split(".")[0] != "envs":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            touching += [f"{name} imports {m}" for m in modules if m.split(".")[0] == "hydra"]
    assert touching == []


@pytest.mark.parametrize("env_id", ["nextstate/Terminal-v0", "nextstate/ToolCall-v0", "nextstate/SWE-v0",
                                    "nextstate/Chat-v0", "nextstate/GUI-v0"])
def test_gym_make_without_arguments_reads_the_conf_defaults(env_id):
    import gymnasium as gym

    import envs
    from nextstate.config import conf_defaults

    name = next(n for n, spec in envs.ENVS.items() if spec.env_id == env_id)
    env = gym.make(env_id, disable_env_checker=True)
    try:
        assert env.unwrapped.config == conf_defaults("env", name, envs.ENVS[name].config_class())
        assert env.unwrapped.tasks, f"{env_id} made with no arguments has no tasks"
    finally:
        env.close()
