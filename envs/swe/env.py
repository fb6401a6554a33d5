"""`nextstate/SWE-v0`: a SWE-bench instance in a Docker sandbox, graded by swebench's rules.

Observation: the issue (problem statement), then each reply's next state: shell output, or the
result of a file edit with a short diff (`envs.swe.actions` documents the reply convention).
Submitting (or a limit cutting the episode) takes the diff of the agent's tree against
`base_commit`, drops its changes to test files, and grades it in a fresh container from the
instance's image (`envs.swe.grading`): the outcome is 1 when swebench's FAIL_TO_PASS /
PASS_TO_PASS rules say resolved. Docker trouble ends the episode as an infra failure, never 0.
"""
from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from envs.base import TextEnv, given_or_default, pick_task, set_tasks
from envs.sandbox import SandboxConfig, SandboxError
from envs.sandboxed import SandboxedEpisodes, render_next_state
from envs.swe.actions import Shell, parse_reply
from envs.swe.edit import apply_edit
from envs.swe.grading import GradeResult, grade_patch, split_patch
from envs.swe.images import ensure_swe_shared_image, instance_image
from envs.swe.instances import load_swe_suite
from envs.swe.oracle import reference_replies
from envs.swe.suspicious import suspicious_lines
from nextstate.config import REPO_ROOT, EnvConfig
from nextstate.types import NextState, Task


@dataclass
class SWEEnvConfig(EnvConfig):
    suite: str
    instances: str  # .json / .jsonl / .parquet, or a swebench task repo; relative to the repo or absolute
    default_split: str  # the split of instances that do not name one
    base_image: str
    shared_images: list[str]  # built in order on base_image; instance images build on the last
    bundle_dockerfile: str
    workdir: str
    user: str
    submit_tokens: list[str]
    show_hints: bool
    obs_max_chars: int
    diff_max_lines: int
    eval_timeout_s: float
    oracle_actions: str  # edit | git_apply
    swe_strict: bool  # a patch that reaches into the test machinery (envs/swe/suspicious.py) scores 0


def _resolve(path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


class SWEEnv(SandboxedEpisodes, TextEnv):
    def __init__(self, config: SWEEnvConfig | None = None, sandbox: SandboxConfig | None = None,
                 *, tasks: list[Task] | None = None, split: str | None = None, run_id: str = "adhoc"):
        config, sandbox = given_or_default("swe", SWEEnvConfig, config, sandbox)
        self.config, self.run_id = config, run_id
        self.sandbox_config = dataclasses.replace(sandbox, workdir=config.workdir)
        found = tasks if tasks is not None else load_swe_suite(
            _resolve(config.instances), split=split, default_split=config.default_split)
        set_tasks(self, found, f"no SWE instances in {config.instances} (split={split})")
        self._client = None
        self._shared: str | None = None
        self._images: dict[str, str] = {}
        self._cwd = config.workdir
        self.task: Task | None = None
        self._graded = False
        self.last_grade: GradeResult | None = None

    # -- images -----------------------------------------------------------------------------------
    def image_for(self, task: Task) -> str:
        if task.task_id not in self._images:
            client = self._docker()
            if self._shared is None:
                self._shared = ensure_swe_shared_image(client, self.config.base_image,
                                                       list(self.config.shared_images))
            self._images[task.task_id] = instance_image(
                client, task, shared_image=self._shared,
                bundle_dockerfile=_resolve(self.config.bundle_dockerfile))
        return self._images[task.task_id]

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._close_sandbox()
        self.task = pick_task(self, options, "SWE instance")
        inst = self.task.data["instance"]
        t0 = time.monotonic()
        info = {"task_id": self.task.task_id, "repo": inst["repo"], "base_commit": inst["base_commit"]}
        self._graded, self.last_grade, self._cwd = False, None, self.config.workdir
        self._start_sandbox(self.task, self.config.user, info)
        info["setup_s"] = time.monotonic() - t0
        return self._instruction(self.task), info

    def _instruction(self, task: Task) -> str:
        inst = task.data["instance"]
        hints = inst["hints_text"].strip() if self.config.show_hints else ""
        return (f"<issue>\n{task.instruction}\n</issue>\n"
                + (f"\n<hints>\n{hints}\n</hints>\n" if hints else "")
                + f"\nThe repository {inst['repo']} is checked out in {self.config.workdir} at commit "
                f"{inst['base_commit'][:12]}. Change its source so that the issue is resolved, then "
                f"reply {self.config.submit_tokens[0]}.")

    def step(self, action: str):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self._sandbox is None:
            return self._infra_failure("the sandbox is not running (it failed at reset)")
        parsed = parse_reply(action, tuple(self.config.submit_tokens))
        if parsed.error:
            ns = NextState(kind="error", text=parsed.error)
            return render_next_state(ns, self.config.obs_max_chars), 0.0, False, False, {"next_state": ns}
        try:
            ns, label = self._run_ops(parsed)
        except SandboxError as e:
            return self._infra_failure(str(e))
        info = {"next_state": ns, "step_label": label}
        if not parsed.submit:
            return ns.text, 0.0, False, False, info
        outcome, final = self.finalize()
        info.update(final)
        if final.get("infra_failure"):
            return self._infra_failure(final["infra_reason"])
        verdict = final["verdict"]
        ns = NextState(kind="test", text=f"{ns.text}\n\n{verdict}".strip(), exit_code=None,
                       fields={k: final[k] for k in ("resolved", "patch_successfully_applied",
                                                     "tests_status", "dropped_test_files")})
        info["next_state"] = ns
        return ns.text, outcome, True, False, info

    def _run_ops(self, parsed) -> tuple[NextState, dict]:
        """Run the reply's blocks in order; a failed edit skips the rest (they may rely on it)."""
        sb, pieces, label, edits = self._sandbox, list(parsed.notes), {}, []
        exit_code, kind = None, "terminal"
        for i, op in enumerate(parsed.ops):
            if isinstance(op, Shell):
                r = sb.exec(op.command)
                self._cwd = r.cwd or self._cwd
                exit_code, kind = r.exit_code, "terminal"
                pieces.append(render_next_state(NextState(
                    kind="terminal", text=r.output, exit_code=r.exit_code, cwd=r.cwd, timed_out=r.timed_out,
                    truncated_bytes=r.truncated_bytes), self.config.obs_max_chars))
                label["exit_ok"] = label.get("exit_ok", True) and r.exit_code == 0
                continue
            res = apply_edit(sb, op, self._cwd, self.config.diff_max_lines)
            exit_code, kind = (0 if res.ok else 1), "tool"
            edits.append({"path": res.path, "ok": res.ok})
            label["edit_ok"] = label.get("edit_ok", True) and res.ok
            pieces.append(("" if res.ok else "[edit failed] ") + res.text)
            if not res.ok and i + 1 < len(parsed.ops):
                pieces.append(f"[{len(parsed.ops) - i - 1} later block(s) of this reply were not run]")
                break
        text = "\n\n".join(pieces)  # empty only for a bare SUBMIT
        return NextState(kind=kind, text=text, exit_code=exit_code, cwd=self._cwd,
                         fields={"edits": edits} if edits else {}), label

    def finalize(self) -> tuple[float, dict]:
        """Grade once: the agent's diff (minus test files) in a fresh container. Idempotent."""
        if self._graded or self._sandbox is None:
            return 0.0, {}
        self._graded = True
        t0 = time.monotonic()
        inst = self.task.data["instance"]
        try:
            self._sandbox.kill_all_processes()  # nothing of the agent's keeps changing the tree
            patch, diff_error = self._agent_diff(inst["base_commit"])
        except SandboxError as e:
            self._close_sandbox()
            return 0.0, {"infra_failure": True, "infra_reason": str(e)}
        self._close_sandbox()
        graded_patch, dropped = split_patch(patch)
        res = grade_patch(self._images[self.task.task_id], inst, graded_patch, sandbox=self.sandbox_config,
                          run_id=self.run_id, client=self._docker(), timeout_s=self.config.eval_timeout_s)
        self.last_grade = res
        if res.infra_failure:
            return 0.0, {"infra_failure": True, "infra_reason": res.infra_reason}
        suspicious = suspicious_lines(graded_patch)
        resolved = res.resolved and not (suspicious and self.config.swe_strict)
        outcome = 1.0 if resolved else 0.0
        return outcome, {
            "outcome": outcome, "success": resolved, "resolved": resolved, "swebench_resolved": res.resolved,
            "suspicious": suspicious,
            "patch_exists": res.patch_exists, "patch_successfully_applied": res.patch_successfully_applied,
            "tests_status": res.tests_status, "tests_timed_out": res.tests_timed_out,
            "swebench_report": res.report, "model_patch": graded_patch, "dropped_test_files": dropped,
            "test_output": (res.test_output or res.apply_output)[-4000:], "grade_s": res.seconds,
            "verdict": self._verdict(res, dropped, diff_error, suspicious, self.config.swe_strict),
            "verify_s": time.monotonic() - t0,
        }

    def _agent_diff(self, base_commit: str) -> tuple[str, str]:
        """The agent's changes as `git diff` against base_commit, new files included. An agent
        that broke git itself gets an empty patch (its doing, not the infrastructure's)."""
        out_file = f"/tmp/.nextstate-{secrets.token_hex(6)}.patch"
        code, out = self._sandbox.run(
            f"rm -f {out_file} && git add -A && git -c core.quotepath=off diff --cached --binary "
            f"--no-color --no-ext-diff --no-textconv {base_commit} > {out_file}",
            workdir=self.config.workdir, timeout=120)
        if code != 0:
            alive, why = self._sandbox.run("true", timeout=30)  # fails only where the container is gone
            if alive != 0:
                raise SandboxError(f"the agent's container died before its diff was taken: {why.strip()[:300]}")
            return "", f"could not take the diff of {self.config.workdir}: {out.strip()[-300:]}"
        return self._sandbox.download(out_file).decode("utf-8", errors="replace"), ""

    @staticmethod
    def _verdict(res: GradeResult, dropped: list[str], diff_error: str, suspicious: list[str], strict: bool) -> str:
        lines = [f"[submitted] {diff_error}" if diff_error else "[submitted]"]
        if dropped:
            lines.append(f"Changes to test files and test configuration (conftest.py, pytest.ini, tox.ini, setup.cfg, "
                         f"pyproject.toml, sitecustomize.py) are not graded and were dropped: {', '.join(dropped)}")
        if not res.patch_exists:
            lines.append("The patch is empty: nothing in the repository was changed.")
        elif not res.patch_successfully_applied:
            lines.append("The patch did not apply cleanly to a fresh checkout, or the tests could not run.")
        status = res.tests_status or {}
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if key in status:
                ok, bad = status[key]["success"], status[key]["failure"]
                failing = f" (failing: {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''})" if bad else ""
                lines.append(f"{key}: {len(ok)}/{len(ok) + len(bad)} passing{failing}")
        if res.tests_timed_out:
            lines.append("The tests timed out.")
        if suspicious:
            lines.append("The patch reaches into the test machinery from the package under test "
                         f"({'scored 0' if strict else 'flagged'}): " + "; ".join(suspicious[:5]))
        lines.append(f"Resolved: {'yes' if res.resolved and not (suspicious and strict) else 'no'}.")
        return "\n".join(lines)

    def reference_actions(self, task: Task) -> list[str]:
        """The gold patch, applied through the env's own edit actions, then SUBMIT."""
        return reference_replies(task.data["instance"]["patch"], self.config.submit_tokens[0],
                                 self.config.oracle_actions)

    def tools_for(self, task: Task) -> None:
        return None  # SWE agents act through text blocks, not tool schemas
