"""`run_python`: the agent's code runs in a Docker sandbox (network none, memory/pid limits from
conf/sandbox), as the unprivileged user, under a hard timeout.

A container is started on an episode's first python call (~0.3 s) and serves that episode's calls;
each call is a fresh `python3 -I` process (no state carries between calls). The next episode that
calls python gets a new container: what one episode's code left (a file anywhere it could write, a
process that keeps changing its pid with `setsid`) goes with the old one, its own pid namespace
and writable layer, removed in the background. Most episodes never call python and start none.
"""
from __future__ import annotations

import time
from typing import Callable

from envs.sandbox import Sandbox, SandboxError
from envs.sandbox.shell import ansi_c_quote
from envs.toolcall.episode import InfraFailure
from envs.toolcall.tools import Param, Tool, ToolError

SCRATCH = "/tmp/ns-py"
MAX_CODE_CHARS = 20_000


class PythonRunner:
    def __init__(self, start_sandbox: Callable[[], Sandbox], timeout_s: float, max_output_chars: int):
        self._start_sandbox = start_sandbox
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self._sandbox: Sandbox | None = None

    def run(self, code: str, deadline: float | None = None, reply_tool_s: float | None = None) -> dict:
        """Run `code`; with a `deadline` (time.monotonic()), for no longer than what is left until
        then, if that is less than the tool's own timeout: the reply's tool time (`reply_tool_s`)
        is a cap, and a call started just inside it must not run a whole timeout past it."""
        if len(code) > MAX_CODE_CHARS:
            raise ToolError(f"the code is {len(code)} characters; at most {MAX_CODE_CHARS}")
        try:
            if self._sandbox is None:
                self._sandbox = self._start_sandbox()
            t, cut_by_reply = self.timeout_s, False
            if deadline is not None and deadline - time.monotonic() < t:  # `timeout 0` would mean none
                t, cut_by_reply = max(deadline - time.monotonic(), 0.1), True
            r = self._sandbox.exec(f"mkdir -p {SCRATCH} && cd {SCRATCH} && "
                                   f"timeout -k 1 {t:g} python3 -I -c {ansi_c_quote(code)}", timeout=t + 15)
        except SandboxError as e:
            self.close()
            raise InfraFailure(f"python sandbox: {e}") from e
        # 137 is SIGKILL: `timeout -k` after its grace second, or the kernel's OOM killer well before
        # the time is up (the sandbox's memory limit); the clock tells them apart.
        out_of_memory = r.exit_code == 137 and not r.timed_out and r.seconds < t
        timed_out = r.timed_out or r.exit_code == 124 or (r.exit_code == 137 and not out_of_memory)
        out = r.output
        if len(out) > self.max_output_chars:
            out = out[: self.max_output_chars] + f"\n[... {len(out) - self.max_output_chars} characters cut ...]"
        result = {"output": out, "exit_code": r.exit_code}
        if timed_out:
            result["error"] = f"timed out after {round(t, 1):g} s" + (
                f": what was left of the reply's {reply_tool_s:g} s of tool time (max_reply_tool_s)"
                if cut_by_reply and reply_tool_s is not None else "")
        elif out_of_memory:
            result["error"] = "killed: out of memory (the sandbox's memory limit)"
        return result

    def new_episode(self) -> None:
        """Nothing an earlier episode's code left reaches the next: its container goes (a new one
        starts on the next call)."""
        self.close()

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


def run_python(ctx, code: str):
    if ctx.python is None:
        raise ToolError("the python tool is not available in this environment")
    return ctx.python.run(code, ctx.deadline, ctx.reply_tool_s)


TOOLS = [
    Tool("run_python", "Run a Python 3 program in a sandbox without network and return its printed "
         "output (stdout and stderr) and exit code. Each call is a fresh process: print what you need.",
         {"code": Param("string", "The program.")}, run_python),
]
