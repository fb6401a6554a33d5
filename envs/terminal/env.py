"""`nextstate/Terminal-v0`: a task in a Docker sandbox, driven through a persistent shell.

Observation: text (the instruction, then each command's next state). Action: the agent's reply
(see `terminal_actions`). After the agent says DONE (or a limit cuts in), the task's tests are copied
in — the agent never sees them — and run as root; the outcome (1/0, or Harbor's reward) is the last
step's reward. Docker trouble ends the episode as an infra failure, never as reward 0. The agent's
writable places (its workdir, /tmp, /var/tmp, /home) hold `sandbox.disk_limit` of new files each
(envs/sandbox/disk.py), and so does the rest of the container's filesystem (envs/sandbox/disk_watch.py:
past it every process is killed); past it a command fails, its next state names the limit, and the
episode goes on as the agent's. A Harbor task's `storage_mb` is its disk limit.

`suite: templated` swaps the task dirs for short tasks generated from seeds (envs/terminal/templated.py):
they run in the shared image, their files are laid out before the first step, their checks run from
the harness (never from the container), and each step's label says whether it made progress.
"""
from __future__ import annotations

import dataclasses
import secrets
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from envs.base import TextEnv, given_or_default, pick_task, set_tasks
from envs.sandbox import Sandbox, SandboxConfig, SandboxError, SandboxFullError
from envs.sandbox.closure import TRACE_LOG, TRACER_DIR, traced, tracer_files
from envs.sandbox.images import build_image, ensure_shared_image
from envs.sandbox.integrity import scratch_find, scratch_tampering, tampering
from envs.sandboxed import SandboxedEpisodes, render_next_state
from envs.task_formats import load_suite
from envs.terminal import grader_closure, templated
from envs.terminal.actions import parse_action
from envs.terminal.harbor import (
    broken_report,
    empty_context,
    fresh_reward_dir,
    harbor_reward,
    unhonoured_report,
    warn_once,
)
from nextstate.config import REPO_ROOT, EnvConfig
from nextstate.types import NextState, Task

_ORACLE = "# nextstate-oracle "  # + the env's key: the reply that gets the task's solution/ uploaded
_SCRATCH = ("/tmp", "/var/tmp", "/home")  # with the workdir: where an agent writes, size-limited
_NOT_IN_IMAGE = {"tests", "solution", "solution.sh", "run-tests.sh", "task.yaml", "task.toml",
                 "instruction.md"}


def first_observation(task: Task, user: str | None, workdir: str | None) -> str:
    """What the agent reads at reset: the instruction, and who and where it is."""
    return f"{task.instruction}\n\nYou are user `{user}` in {workdir}."


@dataclass
class TerminalEnvConfig(EnvConfig):
    suite: str
    tasks_dir: str
    shared_image: str
    base_image: str
    image_map: dict[str, str]
    base_image_fallback: str | None
    user: str
    obs_max_chars: int
    done_token: str
    templated_train: int  # suite: templated: how many train and test instances, and the seed they come from
    templated_test: int
    templated_seed: int
    regrade_verifier_timeouts: bool  # run a verifier its time limit killed once more
    grader_closure: bool  # trace each task's verifier once; a change to what it touches is tampering
    closure_dir: str      # where the traced closures are kept, by image and tests


PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def grading_environment(tests_dir: str) -> dict[str, str]:
    """What the tests run with, whatever the agent left in the container: pytest reads its config only
    from the task's own /tests (`-c` names it, or /dev/null where the task has none, so a /pytest.ini
    or /conftest.py the agent planted above /tests is never read: `--confcutdir`), roots at /tests,
    writes no cache, and Python skips the user site dir. A task's own pytest options still apply."""
    own = next((f"/tests/{name}" for name in PYTEST_CONFIGS if (Path(tests_dir) / name).is_file()), "/dev/null")
    return {"PYTEST_ADDOPTS": f"-c {own} --rootdir=/tests --confcutdir=/tests -p no:cacheprovider",
            "PYTHONNOUSERSITE": "1"}


class TerminalEnv(SandboxedEpisodes, TextEnv):
    def __init__(self, config: TerminalEnvConfig | None = None, sandbox: SandboxConfig | None = None,
                 *, tasks: list[Task] | None = None, split: str | None = None, run_id: str = "adhoc"):
        config, sandbox = given_or_default("terminal", TerminalEnvConfig, config, sandbox)
        self.config, self.sandbox_config, self.run_id = config, sandbox, run_id
        if config.suite not in ("bundled", "templated"):
            raise ValueError(f"unknown terminal suite {config.suite!r}; choose bundled or templated")
        tasks_dir = Path(config.tasks_dir)
        root = tasks_dir if tasks_dir.is_absolute() else REPO_ROOT / tasks_dir
        if tasks is not None:
            found = tasks
        elif config.suite == "templated":
            found = templated.generate(config.templated_train, config.templated_test, config.templated_seed, split)
        else:
            found = load_suite(root, env="terminal", split=split)
        hint = ""
        if not found and tasks is None and config.suite == "bundled" and split not in (None, "all"):
            every = load_suite(root, env="terminal")
            if every:
                hint = (f"; its {len(every)} tasks are in split(s) {sorted({t.split for t in every})}: "
                        "choose one with split=<name>, or split=all")
        set_tasks(self, found, f"no terminal tasks in {config.tasks_dir} (split={split}){hint}")
        self._client = None
        self._images: dict[str, str] = {}
        self._shared: str | None = None  # the shared image's tag, once made
        self._image_failures: dict[str, str] = {}  # task id -> why its image could not be made
        self._image_config: dict[str, dict] = {}
        self._oracle_key = secrets.token_hex(16)
        self.task: Task | None = None
        self._graded = False
        self._deadline: float | None = None  # the task's own agent timeout (Harbor [agent].timeout_sec)
        self._agent_root = False
        self._agent_user = "root"
        self._host_cpus: float | None = None
        self._passing = ""  # a templated task's checks after the last step: one 0/1 per check
        self.trace_verifier = False  # set while the grader's closure is recorded (envs/terminal/grader_closure.py)
        self.trace_log: str | None = None
        warn_once(unhonoured_report(self.tasks))
        warn_once(broken_report(self.tasks))

    # -- images -----------------------------------------------------------------------------------
    def image_for(self, task: Task) -> str:
        """The task's image, built once; a task whose image cannot be made raises SandboxError with
        the reason, and is not tried again by this env."""
        if task.data.get("load_error"):
            raise SandboxError(f"task {task.task_id} did not load: {task.data['load_error']}")
        if task.task_id in self._image_failures:
            raise SandboxError(self._image_failures[task.task_id])
        if task.task_id not in self._images:
            try:
                client = self._docker()
                if self._shared is None:  # hashing its build context costs: once per env
                    self._shared = ensure_shared_image(client, self.config.shared_image, self.config.base_image)
                templated_task = task.data["format"] == "templated"  # runs in the shared image as it is
                self._images[task.task_id] = self._shared if templated_task else self._build(client, task)
            except (SandboxError, OSError) as e:
                self._image_failures[task.task_id] = f"no image for task {task.task_id}: {e}"
                raise SandboxError(self._image_failures[task.task_id]) from e
        return self._images[task.task_id]

    def _build(self, client, task: Task) -> str:
        """Harbor: `docker_image` instead of a Dockerfile. (`[environment].env` is the container's
        environment, set when it starts, not baked into the image: values read from the harness's
        environment, a key for instance, never land in an image.)"""
        d = task.data
        context = Path(d["build_context"])
        text = f"FROM {d['docker_image']}\n" if d.get("docker_image") else None
        if not context.is_dir():  # a docker_image task needs no environment/ dir
            context = empty_context()
        return build_image(client, context, f"nextstate-task/{task.task_id.lower()}",
                           dockerfile=d["dockerfile"], dockerfile_text=text, image_map=self.config.image_map,
                           fallback=self.config.base_image_fallback, exclude=_NOT_IN_IMAGE)

    def prepare(self, tasks: list[Task] | None = None, progress=None) -> None:
        """Every task's image up front; one that fails is recorded (its episode becomes an infra
        failure saying why) and the others are built. The broken ones are listed in one warning."""
        tasks = tasks or self.tasks
        for task in tasks:
            try:
                self.image_for(task)
            except SandboxError:
                pass
            if progress is not None:
                progress(task)
        warn_once(broken_report([t for t in tasks if not t.data.get("load_error")], self._image_failures))

    def _run_as(self, task: Task, image: str) -> tuple[str, str]:
        """(user, workdir) of the agent. Terminal-Bench 1.x: the env's user unless the task says
        `run_as`, in the sandbox's workdir. Harbor: `[agent].user`, else the image's own user (as
        Harbor runs it; the env's `agent` user is not in third-party images), and
        `[environment].workdir`, else the image's WORKDIR."""
        if task.data["format"] != "harbor":
            return task.data.get("run_as") or self.config.user, self.sandbox_config.workdir
        if image not in self._image_config:
            self._image_config[image] = self._docker().images.get(image).attrs.get("Config") or {}
        conf = self._image_config[image]
        return (task.data.get("run_as") or conf.get("User") or "root",
                task.data.get("workdir") or conf.get("WorkingDir") or self.sandbox_config.workdir)

    def _limits_for(self, task: Task, workdir: str) -> SandboxConfig:
        """The sandbox config with the task's own limits (Harbor `cpus`, `memory_mb`/`memory`, and
        `storage_mb`/`storage` as the disk limit: each scratch mount, and the rest of the container's
        filesystem, holds that much of new files)."""
        c = dataclasses.replace(self.sandbox_config, workdir=workdir)
        if task.data.get("memory_mb"):
            c = dataclasses.replace(c, memory=f"{task.data['memory_mb']}m")
        if task.data.get("storage_mb"):
            c = dataclasses.replace(c, disk_limit=f"{task.data['storage_mb']}m")
        if task.data.get("cpus"):  # no more than the daemon has: Docker refuses a larger quota
            if self._host_cpus is None:
                self._host_cpus = float(self._docker().info()["NCPU"])
            c = dataclasses.replace(c, cpus=min(float(task.data["cpus"]), self._host_cpus))
        return c

    def _start_task_sandbox(self, task: Task, info: dict) -> None:
        try:
            image = self.image_for(task)
            user, workdir = self._run_as(task, image)
            self._sandbox = Sandbox(image, self._limits_for(task, workdir), run_id=self.run_id,
                                    client=self._docker(), user=user, environment=task.data.get("env") or None,
                                    scratch=(workdir, *_SCRATCH))
            self._sandbox.start()
            who = self._sandbox.exec("id -un; id -u", timeout=10).output.split()
            # a root agent's processes are all killed before grading; an unknown uid counts as root
            self._agent_root = not (who and who[-1].isdigit() and who[-1] != "0")
            self._agent_user = "root" if self._agent_root else who[0]
            info.update(user=who[0] if len(who) == 2 else user, workdir=workdir)
            if task.data["format"] == "templated":
                self._lay_out(task)
        except SandboxError as e:
            self._close_sandbox()
            info.update(infra_failure=True, infra_reason=str(e))

    def _lay_out(self, task: Task) -> None:
        """A templated task's files, written as root and given to the agent; then its checks' first
        reading (the baseline a step's progress is measured against)."""
        code, out = self._sandbox.run(templated.setup_script(task, self._agent_user), timeout=30)
        if code != 0:
            raise SandboxError(f"setup of {task.task_id} failed (exit {code}): {out[-300:]}")
        self._passing = self._checks(task)

    def _checks(self, task: Task) -> str:
        """One 0/1 per check of a templated task, run as root by the harness, in the workdir. Docker's
        exec now and then loses the tail of a short command's output (docker-py #2042): the checks only
        read, so a reading that exits 0 with the wrong shape is taken again, once."""
        for _ in range(2):
            code, out = self._sandbox.run(templated.check_script(task), timeout=task.data["test_timeout_s"])
            if code == 0 and len(out) == len(task.data["checks"]) and not set(out) - {"0", "1"}:
                return out
            if code != 0:
                break
        raise SandboxError(f"the checks of {task.task_id} did not run (exit {code}): {out[-300:]}")

    def _progress(self, task: Task) -> bool:
        """Whether the step made progress: a check holds that did not before, and none that held
        before fails now (a right command moves the task on; a useless or harmful one does not)."""
        before, self._passing = self._passing, self._checks(task)
        gained = any(b == "0" and a == "1" for b, a in zip(before, self._passing))
        lost = any(b == "1" and a == "0" for b, a in zip(before, self._passing))
        return gained and not lost

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._close_sandbox()
        self.task = task = pick_task(self, options, "terminal task")
        t0 = time.monotonic()
        info = {"task_id": task.task_id}
        self._graded, self._deadline = False, None
        self._start_task_sandbox(task, info)
        info["setup_s"] = time.monotonic() - t0
        if task.data["format"] == "harbor":  # Harbor's [agent].timeout_sec bounds the episode
            self._deadline = time.monotonic() + task.data["agent_timeout_s"]
        return first_observation(task, info.get("user"), info.get("workdir")), info

    def step(self, action: str):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self._sandbox is None:
            return self._infra_failure("the sandbox is not running (it failed at reset)")
        timeout = None
        if self._deadline is not None:  # the task's own agent timeout: commands get what is left
            left = self._deadline - time.monotonic()
            if left <= 0:
                return self._out_of_time(NextState(kind="error", text="the task's agent timeout was reached; "
                                                   "the reply was not run"), {})
            timeout = min(self.sandbox_config.command_timeout_s, left)
        parsed = parse_action(action, self.config.done_token)
        if parsed.error:
            ns = NextState(kind="error", text=parsed.error)
            info = {"next_state": ns, "step_label": {"parsed": False}}
            return render_next_state(ns, self.config.obs_max_chars), 0.0, False, False, info
        info: dict = {}
        if parsed.command:
            try:
                self._oracle_setup(parsed.command)
                r = self._sandbox.exec(parsed.command, timeout=timeout)
            except SandboxError as e:
                return self._infra_failure(str(e))
            ns = NextState(kind="terminal", text=r.output, exit_code=r.exit_code, cwd=r.cwd,
                           timed_out=r.timed_out, truncated_bytes=r.truncated_bytes,
                           fields={"shell_restarted": r.restarted})
            # A verifiable step label: did the command itself succeed (and, templated, move the task on)?
            info["step_label"] = {"parsed": True, "exit_ok": r.exit_code == 0}
            if self.task.data["format"] == "templated":
                try:
                    info["step_label"]["progress"] = self._progress(self.task)
                except SandboxError as e:
                    return self._infra_failure(str(e))
        else:
            ns = NextState(kind="terminal", text="(finished)", exit_code=None, cwd=None)
        info["next_state"] = ns
        if not parsed.done:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                return self._out_of_time(ns, info)
            return render_next_state(ns, self.config.obs_max_chars), 0.0, False, False, info
        outcome, final = self.finalize()
        info.update(final)
        if self.task.data["format"] == "templated" and not final.get("infra_failure"):
            info["step_label"] = {**info.get("step_label", {}), "solved": outcome >= 1.0}
        return render_next_state(ns, self.config.obs_max_chars), outcome, True, False, info

    def _out_of_time(self, ns: NextState, info: dict):
        """The task's agent timeout cut the episode: truncated, and the work so far is graded."""
        outcome, final = self.finalize()
        info.update(final, next_state=ns, truncated_by="agent_timeout")
        return render_next_state(ns, self.config.obs_max_chars), outcome, False, True, info

    def _oracle_setup(self, command: str) -> None:
        """The oracle's reply (it carries this env's key, which only `reference_actions` hands out)
        gets the task's solution/ directory uploaded to /solution first, as Harbor's oracle does."""
        if command.startswith(f"{_ORACLE}{self._oracle_key}\n") and self.task.data.get("solution_dir"):
            self._sandbox.upload(self.task.data["solution_dir"], "/")

    def finalize(self) -> tuple[float, dict]:
        """Grade the task once: copy the tests in after the agent is done, run them as root.

        Nothing the agent left may take part in its grading:
        - A root agent's processes are all killed first (`Sandbox.kill_all_processes`): a loop it
          double-forked away from its shell could rewrite the tests while they are copied in and
          run. A non-root agent's processes keep running, because a task may check a service the
          agent started (start-background-worker does); they cannot touch what grading runs: the
          tests arrive owned by root in a root-owned directory, and run with the interpreter's
          root-owned files only (below).
        - /tests and /logs/verifier are removed before the tests arrive, so that a root agent's
          /tests/conftest.py or a reward.txt written in advance cannot join them.
        - Harbor's reward file: /logs/verifier is made afresh by root just before the verifier runs
          (`harbor.fresh_reward_dir`), in a /logs no other user may write, and it is read once the
          verifier has exited. Only root and the verifier's user can write it, and neither has a
          process of the agent's left: a non-root verifier user's processes are killed first (a
          loop the agent left running as that user wrote reward.txt = 1). What this cannot stop:
          code the tests themselves run (a task whose test.sh executes the agent's program) runs
          as the verifier, and can write the reward while the tests run, as under Harbor.
        - The tests run with /tests as their cwd, not the agent's /app: `python3 -m pytest` puts the
          cwd first on sys.path, so an /app/pytest.py would have been the test runner. The bundled
          run-tests.sh scripts also call `python3 -I` (no cwd, script dir, PYTHON* variables or
          user site on sys.path).
        - The interpreter, pytest, the shell and the libraries the tests run with are the
          container's: a root agent could have rewritten them. Docker's own list of what changed
          against the image is checked first (envs/sandbox/integrity.py); a touched grading
          toolchain scores 0, naming the paths, and the tests never run. For a root agent it is
          checked before the kill (which runs the container's bash) and again after it (a process
          alive until the kill could have changed something meanwhile). The agent's scratch
          directories (size-limited tmpfs mounts: the workdir, /tmp, /var/tmp, /home) are not in
          Docker's list: a pytest copy there is looked for with the image's own `find`.
        - A templated task has no tests to copy in: its checks are held by the harness and run as
          root in the workdir (`_checks`); a check that hangs on what the agent left fails.
        """
        if self._graded or self._sandbox is None:
            return 0.0, {}
        self._graded = True
        t0 = time.monotonic()
        task, sb = self.task, self._sandbox
        clean = "rm -rf /tests /logs/verifier"
        if self._agent_root:  # its processes are all killed below; what the tests write is the harness's
            sb.stop_disk_watch()
        else:  # its processes run beside the tests (and until the container goes): past the limit, they go
            sb.disk_watch_kills_only(self._agent_user)
        try:
            tampered = self._toolchain_tampering(sb)
            if not tampered and self._agent_root:
                sb.kill_all_processes(then=clean)
                tampered = self._toolchain_tampering(sb)
            elif not tampered:
                sb.run(clean)
            if tampered:
                return 0.0, {"outcome": 0.0, "success": False, "tampered": tampered,
                             "test_output": "not graded: the agent changed the grading toolchain: "
                                            + "; ".join(tampered[:20]), "verify_s": time.monotonic() - t0}
            if task.data["format"] == "templated":  # the checks come from here, not from the container
                bits = self._checks(task)
                outcome = 1.0 if set(bits) == {"1"} else 0.0
                failed = [name for (name, _), b in zip(task.data["checks"], bits) if b == "0"]
                return outcome, {"outcome": outcome, "success": outcome >= 1.0, "test_exit_code": int(bool(failed)),
                                 "test_output": f"checks failed: {', '.join(failed)}" if failed else "all checks hold",
                                 "verify_s": time.monotonic() - t0}
            sb.upload(task.data["tests_dir"], "/")  # -> /tests
            if task.data["format"] != "harbor":
                sb.upload(task.data["test_entry"], "/tests")
            outcome, code, out, timed_out = self._run_verifier(task, sb)
            regraded = timed_out and self.config.regrade_verifier_timeouts
            if regraded:  # a machine under load can push a right solution past the limit: once more
                outcome, code, out, timed_out = self._run_verifier(task, sb)
        except SandboxFullError as e:  # the agent filled the disk the tests had to go to
            return 0.0, {"outcome": 0.0, "success": False, "verify_s": time.monotonic() - t0,
                         "test_output": f"not graded: {e}"}
        except SandboxError as e:
            self._close_sandbox()
            return 0.0, {"infra_failure": True, "infra_reason": str(e)}
        if self.trace_verifier:
            self.trace_log = sb.download(TRACE_LOG).decode("utf-8", errors="replace")
        final = {"outcome": outcome, "success": outcome >= 1.0, "test_exit_code": code,
                 "test_output": out[-4000:], "verify_s": time.monotonic() - t0}
        if timed_out or regraded:
            final.update(verifier_timed_out=timed_out, regraded=regraded)
        return outcome, final

    def _run_verifier(self, task: Task, sb) -> tuple[float, int, str, bool]:
        """Run the task's tests once: (outcome, exit code, output, whether its time limit killed it).
        Harbor: as [verifier].user with [verifier].env, the reward read from its file afterwards."""
        limit = task.data["test_timeout_s"]
        t0 = time.monotonic()
        if task.data["format"] == "harbor":
            user = task.data.get("verifier_user") or "root"
            if user != "root" and not self._agent_root:  # (a root agent's processes are all gone)
                sb.kill_user_processes(user)
                if user == self._agent_user:  # the agent's processes are all gone: the verifier's are not its
                    sb.stop_disk_watch()
            code, out = sb.run(fresh_reward_dir(user))
            if code != 0:  # a reward file there could be anyone's: not graded, and not infra (no evidence)
                return 0.0, code, f"not graded: /logs/verifier could not be made afresh: {out[-300:]}", False
            code, out = sb.run(self._verifier("bash /tests/test.sh"), user=user, workdir="/tests", timeout=limit,
                               environment={**grading_environment(task.data["tests_dir"]),
                                            **(task.data.get("verifier_env") or {})})
            outcome = harbor_reward(sb)
        else:
            code, out = sb.run(self._verifier("bash /tests/run-tests.sh"), workdir="/tests", timeout=limit,
                               environment={**grading_environment(task.data["tests_dir"]), "TEST_DIR": "/tests"})
            outcome = 1.0 if code == 0 else 0.0
        timed_out = code in (124, 137) and time.monotonic() - t0 >= limit - 1.0  # `timeout -s KILL`: 137
        if timed_out:
            out += f"\n[the verifier was killed at its {limit:g} s limit: its output ends there]"
        return outcome, code, out, timed_out

    def _verifier(self, command: str) -> str:
        """The verifier's command line: as it is, or under the tracer while its closure is recorded."""
        if not self.trace_verifier:
            return command
        self._sandbox.upload_files(tracer_files(), mode=0o755)
        self._sandbox.run(f"chmod 1777 {TRACER_DIR}")
        return traced(command)

    def _toolchain_tampering(self, sb) -> list[str]:
        """What the agent changed that grading would run: the toolchain list first (cheap, and
        names the usual attacks plainly), then the grader's closure (what tracing the task's
        verifier found it touches; envs/terminal/grader_closure.py)."""
        changes = sb.changes()
        found = tampering(changes, sb.is_dir, sb.download)
        if not found and sb.scratch:  # tmpfs mounts: not in `docker diff`
            found = scratch_tampering(sb.run(scratch_find(sb.scratch), timeout=60)[1])
        if not found and not self.trace_verifier:
            closure = grader_closure.closure_for(self, self.task)
            if closure is not None:
                found = closure.tampering(changes, sb.is_dir)
        return found

    def reference_actions(self, task: Task) -> list[str]:
        """The task's reference solution, as the replies an agent would send."""
        if task.data["format"] == "templated":
            return templated.reference_replies(task, self.config.done_token)
        sol = task.data.get("solution")
        if not sol:
            return [self.config.done_token]
        if task.data["format"] == "harbor":  # solution/ is uploaded (see _oracle_setup); BASH_SOURCE works
            env = "".join(f"{k}={shlex.quote(v)} " for k, v in task.data.get("solution_env", {}).items())
            return [f"```bash\n{_ORACLE}{self._oracle_key}\n{env}bash /solution/solve.sh\n```",
                    self.config.done_token]
        script = Path(sol).read_text()
        return [f"```bash\nbash -s <<'__NS_SOLUTION__'\n{script}\n__NS_SOLUTION__\n```",
                self.config.done_token]

    def tools_for(self, task: Task) -> None:
        return None  # terminal agents act through text, not tool schemas

