"""Our grader and swebench's own harness (`python -m swebench.harness.run_evaluation`, as a user
runs it) give the same verdicts on the same images: two instances, each with its gold patch, a
wrong patch, a patch that does not apply and an empty one. For every patch that ran, the per-test
report (FAIL_TO_PASS / PASS_TO_PASS successes and failures) must match too.

swebench spends ~16 s per instance stopping its container; the four runs go in parallel, so this
takes about half a minute."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from envs.sandbox import wait_for_background_removals
from envs.swe.env import SWEEnv
from envs.swe.grading import grade_patch
from envs.swe.instances import load_swe_suite
from tests.paths import ROOT

pytestmark = pytest.mark.docker
INSTANCES = ROOT / "envs" / "tasks" / "swe" / "instances.jsonl"
IDS = ["nextstate__textkit-3", "nextstate__csvlite-3"]
# a wrong fix for each, (file, old text, new text): one fixes half the cases, one breaks P2P tests
WRONG = {
    "nextstate__textkit-3": ("textkit/case.py", r'r"(?<!^)(?=[A-Z])"', r'r"(?<=[a-z0-9])(?=[A-Z])"'),
    "nextstate__csvlite-3": ("csvlite/writer.py", "if any(c in text for c in ',\"\\n'):", "if text:"),
}


def _wrong_patch(tmp: Path, task) -> str:
    repo = tmp / task.task_id
    subprocess.run(["git", "clone", "-q", task.data["build"]["bundle"], str(repo)], check=True)
    path, old, new = WRONG[task.task_id]
    text = (repo / path).read_text()
    assert text.count(old) == 1
    (repo / path).write_text(text.replace(old, new))
    return subprocess.run(["git", "-C", str(repo), "diff"], capture_output=True, text=True, check=True).stdout


def _unappliable(task) -> str:
    pkg = task.data["instance"]["patch"].split("diff --git a/")[1].split("/")[0]
    return (f"diff --git a/{pkg}/missing.py b/{pkg}/missing.py\n--- a/{pkg}/missing.py\n"
            f"+++ b/{pkg}/missing.py\n@@ -1 +1 @@\n-a\n+b\n")


@pytest.mark.slow  # ~1.5 min: every instance graded twice, by swebench's harness and by ours
def test_same_verdicts_as_swebench_harness(tmp_path, env_config, sandbox_config, docker):
    tasks = [t for t in load_swe_suite(INSTANCES) if t.task_id in IDS]
    env = SWEEnv(env_config("swe"), sandbox_config, tasks=tasks, run_id="pytest-swe-agree")
    env.prepare()  # builds the images and tags them with the names swebench's harness looks up
    preds = {"gold": {t.task_id: t.data["instance"]["patch"] for t in tasks},
             "wrong": {t.task_id: _wrong_patch(tmp_path, t) for t in tasks},
             "unappliable": {t.task_id: _unappliable(t) for t in tasks},
             "empty": {t.task_id: "" for t in tasks}}
    ours = {(kind, t.task_id): grade_patch(env.image_for(t), t.data["instance"], preds[kind][t.task_id],
                                           sandbox=env.sandbox_config, run_id="pytest-swe-agree", client=docker)
            for kind in preds for t in tasks}
    env.close()
    wait_for_background_removals()
    for kind, patches in preds.items():
        # One harness run at a time: its report lists every container on the daemon and inspects each,
        # so containers another run removes meanwhile make it fail with a 404 (seen in CI).
        pred_file = tmp_path / f"{kind}.jsonl"
        pred_file.write_text("".join(
            json.dumps({"instance_id": i, "model_patch": p, "model_name_or_path": kind}) + "\n"
            for i, p in patches.items()))
        proc = subprocess.run(
            [sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(INSTANCES), "-s", "test",
             "-i", *IDS, "-p", str(pred_file), "--max_workers", "2", "-id", f"agree-{kind}",
             "--report_dir", str(tmp_path)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, timeout=600)
        out = proc.stdout
        assert proc.returncode == 0, out[-3000:]
        run = json.loads((tmp_path / f"{kind}.agree-{kind}.json").read_text())
        assert run["unstopped_instances"] == 0
        for iid in IDS:
            mine = ours[(kind, iid)]
            assert not mine.infra_failure, mine.infra_reason
            assert mine.resolved == (iid in run["resolved_ids"]), (kind, iid)
            report_file = tmp_path / "logs" / "run_evaluation" / f"agree-{kind}" / kind / iid / "report.json"
            if kind == "empty":
                assert iid in run["empty_patch_ids"] and not report_file.exists()
            elif kind == "unappliable":
                assert iid in run["error_ids"] and not report_file.exists()
                assert not mine.patch_successfully_applied
            else:
                theirs = json.loads(report_file.read_text())[iid]
                assert mine.patch_successfully_applied == theirs["patch_successfully_applied"]
                assert mine.tests_status == theirs["tests_status"], (kind, iid)
    # the cases differ from each other: gold resolves, the wrong fixes fail in different ways
    assert all(ours[("gold", i)].resolved for i in IDS) and not any(ours[("wrong", i)].resolved for i in IDS)
    textkit, csv = (ours[("wrong", i)].tests_status for i in IDS)
    assert textkit["FAIL_TO_PASS"]["success"] and textkit["FAIL_TO_PASS"]["failure"]  # partial
    assert csv["PASS_TO_PASS"]["failure"]  # a regression
