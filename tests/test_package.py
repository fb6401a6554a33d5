"""`pip install .` gives a working library: the wheel carries conf/, the task data and the sandbox
scripts, and `import nextstate` registers every env. The wheel is installed into a directory of its own
and run by a fresh interpreter from a directory outside the checkout, with the dev venv's third-party
packages on PYTHONPATH (that path adds no `.pth` files, so the editable install stays out of it)."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(tmp / "dist")],
                   check=True, capture_output=True)
    wheel = next((tmp / "dist").glob("nextstate-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(tmp / "site"), str(wheel)],
                   check=True, capture_output=True)
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True)
    work = tmp / "work"
    work.mkdir()
    deps = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "PYTHONPATH": f"{tmp / 'site'}{os.pathsep}{deps}"}
    return {"python": str(tmp / "venv" / "bin" / "python"), "cwd": work, "env": env, "site": tmp / "site"}


def run(installed: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([installed["python"], *args], cwd=installed["cwd"], env=installed["env"],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_wheel_carries_configs_task_data_and_scripts(installed):
    site = installed["site"]
    assert (site / "conf" / "config.yaml").is_file()
    assert (site / "conf" / "experiment" / "general_toolcall.yaml").is_file()
    assert (site / "envs" / "toolcall" / "tools" / "cities.csv").is_file()
    assert (site / "envs" / "tasks" / "personas" / "brief.yaml").is_file()
    assert (site / "scripts" / "ensure_docker.sh").is_file()


def test_the_readme_gymnasium_snippet_runs_from_the_wheel(installed):
    p = run(installed, "-c", (
        "import gymnasium as gym, nextstate, envs\n"
        "gym.register_envs(nextstate)\n"
        "assert envs.__file__.startswith(%r), envs.__file__\n"
        "env = gym.make('nextstate/Chat-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "print('OBS', obs[:40])\n") % str(installed["site"]))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "OBS " in p.stdout


@pytest.mark.slow
def test_harness_run_works_from_the_wheel_outside_the_checkout(installed):
    p = run(installed, "-m", "harness.run", "env=chat", "agent=oracle", "limit=1", "progress=false")
    assert p.returncode == 0, p.stdout[-1500:] + p.stderr[-2000:]
    assert "success rate 100.0%" in p.stdout
    assert list((installed["cwd"] / "results" / "runs").iterdir())
