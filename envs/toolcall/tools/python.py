"""`run_python`: the agent's code runs in a Docker sandbox (network none, memory/pid limits from
conf/sandbox), as the unprivileged user, under a hard timeout.

One container serves every episode of an env: it is started on the first call (~0.3 s) and reused,
since most episodes never call python and starting one per episode would dominate the step time.
Each call is a fresh `python3 -I` process (no state carries between calls); at the start of an
episode that used python, every leftover process of the sandbox user is killed and the scratch
directory wiped.
"""
from __future__ import annotations

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
        self._dirty = False

    def run(self, code: str) -> dict:
        if len(code) > MAX_CODE_CHARS:
            raise ToolError(f"the code is {len(code)} characters; at most {MAX_CODE_CHARS}")
        try:
            if self._sandbox is None:
                self._sandbox = self._start_sandbox()
            self._dirty = True
            t = self.timeout_s
            r = self._sandbox.exec(f"mkdir -p {SCRATCH} && cd {SCRATCH} && "
                                   f"timeout -k 1 {t:g} python3 -I -c {ansi_c_quote(code)}", timeout=t + 15)
        except SandboxError as e:
            self.close()
            raise InfraFailure(f"python sandbox: {e}") from e
        timed_out = r.timed_out or r.exit_code in (124, 137)
        out = r.output
        if len(out) > self.max_output_chars:
            out = out[: self.max_output_chars] + f"\n[... {len(out) - self.max_output_chars} characters cut ...]"
        result = {"output": out, "exit_code": r.exit_code}
        if timed_out:
            result["error"] = f"timed out after {t:g} s"
        return result

    def new_episode(self) -> None:
        """Clear what an earlier episode's code left (processes, files) before the next one runs."""
        if self._sandbox is None or not self._dirty:
            return
        try:
            # every process of the sandbox user except this shell ($$), then the scratch files
            self._sandbox.exec(f'for p in $(pgrep -u "$(id -u)"); do [ "$p" = "$$" ] || kill -9 "$p" '
                               f"2>/dev/null; done; rm -rf {SCRATCH}; true", timeout=15)
            self._dirty = False
        except SandboxError:
            self.close()  # a broken container is replaced on the next call

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


def run_python(ctx, code: str):
    if ctx.python is None:
        raise ToolError("the python tool is not available in this environment")
    return ctx.python.run(code)


TOOLS = [
    Tool("run_python", "Run a Python 3 program in a sandbox without network and return its printed "
         "output (stdout and stderr) and exit code. Each call is a fresh process: print what you need.",
         {"code": Param("string", "The program.")}, run_python),
]
