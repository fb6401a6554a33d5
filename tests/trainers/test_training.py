"""Training with the real model: the PPO update moves every trained parameter; a 2-iteration run
end to end writes a leaderboard row; a run stopped after iteration 1 and resumed ends with the same
weights as one that never stopped; oracle votes and hints come only from labels and the task itself."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nextstate.leaderboard import read_rows
from nextstate.types import NextState, Sample, Step
from tests.paths import ROOT
from trainers.feedback.oracle_judge import OracleHints, OracleJudge, oracle_hint


def test_oracle_votes_equal_step_labels():
    def mk(labels):
        return Step(0, [], "a", NextState(kind="terminal", text=""),
                    info={"step_label": labels} if labels is not None else {})

    steps = [mk({"parsed": True, "exit_ok": True}), mk({"parsed": True, "exit_ok": False}), mk({"parsed": False}),
             mk(None)]
    js = OracleJudge(m=3).votes(steps)
    assert [j.score for j in js] == [1.0, -1.0, -1.0, 0.0]
    assert js[0].votes == (1, 1, 1)


def test_oracle_hints_come_only_from_the_current_task():
    refs = {"t1": ["```bash\nls\n```", "DONE"], "t2": ["```bash\nrm x\n```"]}
    steps = [Step(i, [], "a", NextState(kind="terminal", text="")) for i in (0, 1, 2)]
    asked = []
    hints = OracleHints(lambda t: asked.append(t) or refs[t]).hints_for(["t1", "t1", "t1"], steps)
    assert asked == ["t1"]  # fetched once, and only for the task at hand
    assert "ls" in hints[0] and "DONE" in hints[1] and hints[2] is None
    assert all("rm x" not in (h or "") for h in hints)
    assert oracle_hint([], 0) is None


@pytest.mark.slow
@pytest.mark.model
def test_ppo_update_changes_every_trained_parameter(cfg):
    from transformers import AutoModelForCausalLM

    from agents.factory import model_path
    from nextstate.config import ModelConfig, typed
    from trainers.update import UpdateConfig, ppo_update

    path = model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    samples = [Sample([1, 2, 3, 4], [5, 6, 7], [-3.0, -3.0, -3.0], [1.0, 1.0, 1.0]),
               Sample([1, 9, 3], [8, 6], [-2.0, -2.0], [-1.0, -1.0])]
    stats = ppo_update(model, opt, samples, UpdateConfig(1e-4, 0.0, 1.0, 1, 2, 0.2, 0.28, 0.0, 1.0))
    assert stats["updates"] == 1 and stats["grad_norm"] > 0
    unchanged = [k for k, v in model.named_parameters() if torch.equal(v, before[k])]
    assert not unchanged, f"parameters not trained: {unchanged[:5]}"


def test_micro_batches_keep_an_episodes_steps_together_within_the_token_budget():
    from trainers.update import micro_batches

    def sample(prompt, response):
        return Sample(prompt, response, [0.0] * len(response), [1.0] * len(response))

    step0 = sample([1, 2], [3])  # an episode's first step is the start of its second step's row
    step1 = sample([1, 2, 3, 4], [5, 6])
    other = sample([9, 9, 9], [8])
    long = sample(list(range(10, 30)), [7, 7])
    parts = micro_batches([step0, other, step1, long], max_tokens=12)
    assert parts == [[long], [step0, other, step1]]  # 22 tokens alone; then 2 rows of 6 = 12
    assert micro_batches([step0, other], 0) == [[step0, other]]


@pytest.mark.slow
@pytest.mark.model
def test_an_update_in_micro_batches_moves_the_weights_as_one_pass_does(cfg):
    """Gradient accumulation over parts weighted by their share of samples is the minibatch's own
    gradient: the same weights after the step, to float rounding."""
    from transformers import AutoModelForCausalLM

    from agents.factory import model_path
    from nextstate.config import ModelConfig, typed
    from trainers.update import UpdateConfig, ppo_update, sequence_logprobs

    path = model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir)
    samples = [Sample([1, 2, 3, 4], [5, 6, 7], [], [1.0, 0.5, 1.0]),
               Sample([1, 2, 3, 4, 5, 6, 7, 11], [12, 13], [], [-1.0, -1.0]),
               Sample([1, 9, 3], [8, 6], [], [0.5, 0.5])]
    with torch.no_grad():  # sampled by these very weights: ratio 1, so every token's gradient counts
        lp, mask = sequence_logprobs(AutoModelForCausalLM.from_pretrained(path), samples)
    for i, s in enumerate(samples):
        s.old_logprobs = lp[i, :len(s.response_ids)].tolist()
    weights, logs = [], []
    before = {k: v.detach().clone() for k, v in AutoModelForCausalLM.from_pretrained(path).named_parameters()}
    # one pass; in micro-batches; one pass with the rows' shared first token run once (mode.share_prompt_head)
    for micro, head in ((0, False), (8, False), (0, True)):
        model = AutoModelForCausalLM.from_pretrained(path)
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
        logs.append(ppo_update(model, opt, samples, UpdateConfig(1e-2, 0.0, 1e9, 1, 3, 0.2, 0.28, 0.0, 1.0,
                                                                  micro_batch_tokens=micro, share_prompt_head=head)))
        weights.append({k: v.detach().clone() for k, v in model.named_parameters()})
    assert logs[0]["loss"] == pytest.approx(-(2.5 / 3 - 1 + 0.5) / 3, abs=1e-5)  # -(mean of sample means)
    moved = max(float((w - weights[0][k]).abs().max()) for k, w in before.items())
    assert logs[0]["grad_norm"] > 1
    for other in (1, 2):
        assert logs[other]["loss"] == pytest.approx(logs[0]["loss"], abs=1e-4)  # (a row alone vs padded: float noise)
        # a part alone is computed without the others' padding: float noise of ~1e-4 (a part weighted by
        # tokens instead of samples, or left unweighted, is off by tens of percent)
        assert logs[other]["grad_norm"] == pytest.approx(logs[0]["grad_norm"], rel=5e-3)
        worst = max(float((weights[0][k] - weights[other][k]).abs().max()) for k in weights[0])
        assert worst < 5e-3 * moved


TRAIN = ["mode=train", "signal=opd", "hints=oracle", "mode.teacher=policy", "seed=1", "split=all", "parallel=1",
         "mode.tasks_per_iter=2", "mode.group_size=2", "mode.eval_limit=1", "mode.lr=1e-4", "env.max_steps=1",
         "model.max_new_tokens=12"]


def _run(harness_run, tmp_path, *extra, name="run", **kw):
    return harness_run(tmp_path, *TRAIN, f"hydra.run.dir={tmp_path / name}", *extra, timeout=1200, **kw)


def _train(harness_run, tmp_path, *extra, name="run"):
    p = _run(harness_run, tmp_path, *extra, name=name)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return tmp_path / name


@pytest.mark.model
@pytest.mark.docker
@pytest.mark.timeout(1800)  # three short training runs; minutes on a busy 2-core machine
@pytest.mark.slow  # ~2-3 min
def test_two_iterations_train_write_a_row_and_resume_takes_the_same_step(tmp_path, cfg, harness_run):
    p = _run(harness_run, tmp_path, "mode.iterations=2", name="straight")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "Loading weights" not in p.stderr  # progress=false hides the libraries' bars too
    straight = tmp_path / "straight"
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    row = rows[-1]
    assert row["signal"] == "opd" and row["hints"] == "oracle" and int(row["train_episodes"]) == 8
    assert int(row["train_samples"]) > 0 and row["success_before"] != "" and row["success_after"] != ""
    init = load_file(str(Path(cfg.paths.cache_dir) / "models" / "smollm2-135m-instruct" / "model.safetensors"))
    trained = load_file(str(straight / "weights" / "model.safetensors"))
    assert any(not torch.equal(trained[k], init[k]) for k in trained if k in init)  # the served weights moved
    assert (straight / "train_curves.png").exists()  # the run's updates, drawn

    half = _train(harness_run, tmp_path, "mode.iterations=1", name="resumed")
    _train(harness_run, tmp_path, "mode.iterations=2", f"resume={half}", name="resumed")
    resumed = load_file(str(half / "weights" / "model.safetensors"))
    worst = max(float((resumed[k] - trained[k]).abs().max()) for k in trained)
    assert worst < 1e-6, f"resumed run diverged from the straight one by {worst}"

    # the same command again skips the finished run: no new row, the weights untouched
    n_rows = len(read_rows(tmp_path / "leaderboard.csv")[1])
    mtime = (half / "weights" / "model.safetensors").stat().st_mtime_ns
    p = _run(harness_run, tmp_path, "mode.iterations=2", f"resume={half}", name="resumed")
    assert p.returncode == 0 and "already finished" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(read_rows(tmp_path / "leaderboard.csv")[1]) == n_rows
    assert (half / "weights" / "model.safetensors").stat().st_mtime_ns == mtime
    # that run dir asked for a different run is refused, and its config is left as it was
    p = _run(harness_run, tmp_path, "mode.iterations=2", "mode.lr=1e-3", f"resume={half}", name="resumed")
    assert p.returncode != 0 and "another config (differs in: mode.lr)" in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    assert "lr: 0.0001" in (half / "config.yaml").read_text()


@pytest.mark.model
@pytest.mark.docker
@pytest.mark.timeout(1200)
@pytest.mark.slow  # ~1-2 min
def test_a_run_whose_episodes_never_ran_stops_and_resumes_once_docker_is_back(tmp_path, docker, harness_run):
    """Docker unreachable: the evaluation before training (or, where an earlier run cached its score, the
    first rollouts) is all infra failures. The run stops saying so and how to resume, with no checkpoint,
    row or cached score; resumed with Docker back, it trains."""
    import re

    p = _run(harness_run, tmp_path, "mode.iterations=1", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-3000:]
    stopped = r"every one of the (1 episodes of the evaluation \(eval before\)|4 episodes of the rollouts of update 1)"
    assert re.search(stopped + r" failed on infrastructure \(\d of them: no image", p.stderr), p.stderr[-3000:]
    assert "Docker daemon is not reachable" in p.stderr
    resume = p.stderr.split("once it is back, resume with: ", 1)[1].splitlines()[0]
    run_dir = tmp_path / "run"
    assert resume.endswith(f"resume={run_dir}") and "Traceback" not in p.stderr
    assert not (run_dir / "checkpoint").exists() and not (run_dir / "metrics.json").exists()
    assert not (tmp_path / "leaderboard.csv").exists()
    p = _run(harness_run, tmp_path, "mode.iterations=1", f"resume={run_dir}")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert len(read_rows(tmp_path / "leaderboard.csv")[1]) == 1 and (run_dir / "metrics.json").exists()
    import json  # the resumed run evaluated afresh: no failed episode came back from a cache
    assert not any(json.loads(line)["infra_failure"] for line in (run_dir / "eval_before.jsonl").open())


def test_curriculum_knobs():
    from nextstate.types import Task
    from trainers.curriculum import filter_tasks, max_steps_at

    assert [max_steps_at(i, 5, 2, 10) for i in range(5)] == [2, 4, 6, 8, 10]
    assert max_steps_at(3, 5, None, 7) == 7 and max_steps_at(0, 1, 2, 7) == 7
    tasks = [Task("a", "e", "", difficulty="easy", tags=("git",)), Task("b", "e", "", difficulty="hard", tags=("git",)),
             Task("c", "e", "", difficulty="easy", tags=("sql",))]
    assert [t.task_id for t in filter_tasks(tasks, ["easy"], None)] == ["a", "c"]
    assert [t.task_id for t in filter_tasks(tasks, None, ["git"])] == ["a", "b"]
    assert [t.task_id for t in filter_tasks(tasks, ["easy"], ["git"])] == ["a"]
    from trainers.curriculum import without_tags
    assert [t.task_id for t in without_tags(tasks, ["sql"])] == ["a", "b"] and without_tags(tasks, None) == tasks


def test_exclude_tags_narrows_an_eval_run(tmp_path, harness_run):
    """`exclude_tags=[store]` on the tool-call suite: no task with the store toolset is run."""
    import json

    harness_run(tmp_path, "env=toolcall", "agent=noop", "split=test", "exclude_tags=[store,python]", check=True)
    (traj_file,) = tmp_path.glob("runs/*/trajectories.jsonl")
    import yaml

    ids = {json.loads(line)["task_id"] for line in traj_file.read_text().splitlines()}
    specs = [yaml.safe_load(p.read_text()) for p in (ROOT / "envs/tasks/toolcall").glob("*.yaml")]
    assert ids == {d["id"] for d in specs if d["split"] == "test" and not {"store", "python"} & set(d["toolsets"])}


def _async_args(tmp_path, *extra, name="async"):
    return ["mode=async", "env=chat", "signal=opd", "hints=oracle", "mode.teacher=policy", "seed=1", "split=all",
            "parallel=2", "mode.group_size=2", "mode.batch_samples=2", "mode.eval_limit=1", "mode.lr=1e-4",
            "env.max_steps=1", "model.max_new_tokens=12", f"hydra.run.dir={tmp_path / name}", *extra]


@pytest.mark.model
@pytest.mark.timeout(1800)  # two short runs with the real model; no Docker (the chat env)
@pytest.mark.slow  # ~2 min
def test_async_mode_killed_after_an_update_resumes_and_trains_on_fresh_samples(tmp_path, cfg, harness_run):
    from nextstate.atomic import read_jsonl

    run, env = tmp_path / "async", dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "harness.run", "progress=false",
                             *_async_args(tmp_path, "mode.iterations=3")], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    for line in proc.stdout:  # SIGTERM once the first update is logged, with rollouts under way
        lines.append(line)
        if "update 1/3" in line:
            proc.terminate()
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130 and "resume with" in out, out[-3000:]
    assert [x["version"] for x in read_jsonl(run / "train_log.jsonl")] == [1]
    left = subprocess.run(["pgrep", "-f", f"parent-pid {proc.pid}"], capture_output=True).stdout
    assert left == b""  # no server left

    p = harness_run(tmp_path, *_async_args(tmp_path, "mode.iterations=3", f"resume={run}"), timeout=1200)
    assert p.returncode == 0 and "resumed after iteration 0" in p.stdout, p.stdout[-2000:] + p.stderr[-3000:]
    log = read_jsonl(run / "train_log.jsonl")
    assert [x["version"] for x in log] == [1, 2, 3]
    assert all(x["samples"] == 2 and x["staleness_max"] <= 1 for x in log)
    assert all(x["update_s"] > 0 and x["publish_s"] > 0 for x in log) and sum(x["hints_accepted"] for x in log) >= 6
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    assert len(rows) == 1 and rows[0]["mode"] == "async" and int(rows[0]["train_samples"]) == 6
    init = load_file(str(Path(cfg.paths.cache_dir) / "models" / "smollm2-135m-instruct" / "model.safetensors"))
    trained = load_file(str(run / "weights" / "model.safetensors"))
    assert any(not torch.equal(trained[k], init[k]) for k in trained if k in init)  # the served weights moved
