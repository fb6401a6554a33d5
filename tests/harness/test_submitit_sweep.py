"""Sweeps through submitit. `-m hydra/launcher=submitit_local` runs the code path
of `hydra/launcher=slurm` (conf/hydra/launcher/slurm.yaml) without a cluster: the sweep is pickled,
each job is its own process started by submitit, and the jobs share nothing with the submitting
process but the filesystem and what the launcher hands them. The SLURM preset runs through
submitit's SLURM executor on a stand-in for the cluster's commands."""
import json
import os
from pathlib import Path

import pytest

from nextstate.leaderboard import read_rows
from tests.fixtures import fake_slurm
from tests.paths import ROOT

# The cheapest real run: the noop agent on one chat request (no model, no Docker)
JOB = ["env=chat", "agent=noop", "mode=eval", "limit=1"]


def _sweep(run_cli, results: Path, *overrides):
    """`python -m harness.run -m hydra/launcher=submitit_local ...` with its results under `results`."""
    return run_cli("harness.run", "-m", "hydra/launcher=submitit_local", "progress=false", *JOB, *overrides,
                   env={"NEXTSTATE_RESULTS": results}, timeout=300)


@pytest.mark.slow
def test_a_submitit_sweep_files_every_jobs_row_in_one_leaderboard(tmp_path, run_cli):
    p = _sweep(run_cli, tmp_path, "seed=0,1")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    [sweep] = (tmp_path / "multirun").iterdir()  # the sweep dir, under NEXTSTATE_RESULTS as the jobs saw it
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    assert sorted(r["seed"] for r in rows) == ["0", "1"] and {r["agent"] for r in rows} == {"noop"}
    run_dirs = {Path(r["run_dir"]) for r in rows}
    assert run_dirs == {sweep / "0__chat__noop__0", sweep / "1__chat__noop__1"}
    for run_dir in run_dirs:
        assert json.loads((run_dir / "metrics.json").read_text())["leaderboard_row"]["filed"] is True
    # each job ran in a process of its own, started by submitit, which logged it beside the run dirs
    logs = sorted((sweep / ".submitit").glob("*/*_log.out"))
    assert len(logs) == 2, sorted(f.relative_to(sweep) for f in (sweep / ".submitit").rglob("*"))
    for log in logs:
        text = log.read_text()
        assert "Job completed successfully" in text and "success rate" in text, text[-2000:]

    # The same sweep again into its dir (how a sweep cut off by a time limit or preemption is
    # finished): each job finds its run finished, and files no second row.
    p = _sweep(run_cli, tmp_path, "seed=0,1", f"hydra.sweep.dir={sweep}")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert len(read_rows(tmp_path / "leaderboard.csv")[1]) == 2
    assert sum("already finished" in log.read_text() for log in (sweep / ".submitit").glob("*/*_log.out")) == 2


@pytest.mark.slow
def test_slurm_jobs_file_into_the_sweeps_leaderboard_even_given_no_environment(tmp_path, run_cli):
    """`hydra/launcher=slurm` end to end through submitit's SLURM executor, on a stand-in for SLURM
    (tests/fixtures/fake_slurm.py) whose jobs get no environment, as with `sbatch --export=NONE`: the
    jobs still file their rows in the leaderboard the sweep was started with, because the preset
    writes NEXTSTATE_RESULTS into the sbatch script. (Without it they filed into ./results.)"""
    fake_slurm.install(tmp_path / "bin", tmp_path / "slurm")
    results = tmp_path / "shared results"
    # submitted from tmp_path, where a job that lost NEXTSTATE_RESULTS would make ./results
    p = run_cli("harness.run", "-m", "hydra/launcher=slurm", "hydra.launcher.partition=cpu",
                "hydra.launcher.account=lab", "progress=false", *JOB, f"env.tasks_dir={ROOT / 'envs/tasks/chat'}",
                "seed=0,1", timeout=300, cwd=tmp_path,
                env={"NEXTSTATE_RESULTS": results, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert not (tmp_path / "results").exists()
    [sweep] = (results / "multirun").iterdir()
    _, rows = read_rows(results / "leaderboard.csv")
    assert {Path(r["run_dir"]) for r in rows} == {sweep / "0__chat__noop__0", sweep / "1__chat__noop__1"}
    [script] = (sweep / ".submitit").glob("*/*_submission.sh")
    lines = script.read_text().splitlines()
    for line in ("#SBATCH --partition=cpu", "#SBATCH --account=lab", "#SBATCH --job-name=nextstate",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32GB", "#SBATCH --time=360", "#SBATCH --array=0-1%2",
                 f"export NEXTSTATE_RESULTS='{results}'"):
        assert line in lines, script.read_text()
    assert len(list((sweep / ".submitit").glob("*/*_log.out"))) == 2
