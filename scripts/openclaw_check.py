"""`make openclaw-check`: a stock, unpatched OpenClaw trains the model through the proxy (docs/proxy.md).

A fresh proxy (`mode=proxy`, a free port on 127.0.0.1, OPD with the user's next message as the hint,
one update per 2 steps) and an OpenClaw with its own temporary home, registered to the proxy as an
`openai-completions` provider with no extra headers, in the smallest prompt profile OpenClaw has (no
tools, no skills, no memory, no workspace files, no heartbeats). Ten turns of one conversation, one
`openclaw agent --local` process each, three of them corrections. Checked and printed:
- every turn exits 0 and shows a reply; OpenClaw connects to 127.0.0.1 only (strace, when installed);
- no HTTP 409 anywhere (OpenClaw's output and log, the proxy's run.log);
- every turn after the first is recorded as a step (`/health`: steps_recorded), none left unanswered;
- at least one update is trained (the run's train_log.jsonl); the proxy is still up after the last turn;
- the proxy stops on SIGINT, and no process of the check is left behind.
Exit 0 when all hold. Everything is written to a temporary dir, removed at the end (`--keep` keeps it).

    python scripts/openclaw_check.py [--openclaw-dir DIR] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m-instruct"
CONTEXT_WINDOW = 8192  # SmolLM2's own context
MAX_PROMPT_TOKENS = 4096  # the proxy's budget (model.max_prompt_tokens), OpenClaw's contextTokens
MAX_NEW_TOKENS = 96  # the model's max_new_tokens: OpenClaw's maxTokens
TURNS = [
    "What is 2 + 2?",
    "No, answer with just the number.",
    "What is the capital of France?",
    "Thanks. How many days are in a week?",
    "No, answer with just the number.",
    "Name one color of the sky.",
    "Shorter, please: one word.",
    "What is 10 minus 3?",
    "Good. What is the opposite of hot?",
    "Thank you, that is all for today.",
]
PROXY_START_S = 900  # the model, Ray and the policy server on a busy 2-core machine
TURN_S = 600  # one OpenClaw turn (the agent's own --timeout is this too)
UPDATE_WAIT_S = 900  # after the last turn, for the first update if none has come yet
STOP_S = 180
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOG_LINE = re.compile(r"^\[[\w./:-]+\] ")  # OpenClaw's own log lines on stdout: "[agents/agent-command] ..."
HTTP_409 = re.compile(r"\b409\b")
MARKER = "NEXTSTATE_OPENCLAW_CHECK"  # in the environment of every process the check starts


def default_openclaw_dir() -> Path:
    cache = os.environ.get("NEXTSTATE_CACHE") or str(Path.home() / ".cache" / "nextstate")
    return Path(cache) / "openclaw"


def openclaw_config(url: str, api_key: str, home: Path) -> dict:
    """The proxy as OpenClaw's default model, with the smallest prompt OpenClaw builds."""
    return {
        "models": {
            "mode": "replace",  # only this provider: no catalog discovery, no fallbacks elsewhere
            "providers": {"nextstate": {
                "baseUrl": url,
                "apiKey": api_key,
                "api": "openai-completions",
                "timeoutSeconds": TURN_S,
                "models": [{
                    "id": MODEL, "name": "SmolLM2-135M-Instruct (NextState proxy)", "reasoning": False,
                    "input": ["text"], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": CONTEXT_WINDOW, "contextTokens": MAX_PROMPT_TOKENS, "maxTokens": MAX_NEW_TOKENS,
                    "compat": {"supportsTools": False},
                }],
            }},
        },
        "tools": {"profile": "minimal", "toolSearch": False},
        "plugins": {"slots": {"memory": "none"}},
        "agents": {"defaults": {
            "model": {"primary": f"nextstate/{MODEL}"},
            "skipBootstrap": True, "contextInjection": "never", "skills": [], "heartbeat": {"every": "0m"},
        }},
        "logging": {"file": str(home / "openclaw.log")},
    }


def health(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=30) as r:
        return json.loads(r.read())


def children_of(root: int) -> set[int]:
    """`root`'s descendants now (from /proc)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    out, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - out
        out |= frontier
    return out


def marked_processes(tag: str) -> list[int]:
    """Live processes whose environment carries the check's marker (anything it started, at any depth)."""
    needle = f"{MARKER}={tag}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if needle in (d / "environ").read_bytes().split(b"\0"):
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def kill_all(pids) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(2)


def loopback_only(strace_file: Path) -> list[str]:
    """The connect() calls in an strace log that leave 127.0.0.1 / ::1."""
    bad = []
    for line in strace_file.read_text(errors="replace").splitlines():
        if "connect(" not in line or "AF_INET" not in line:
            continue
        if not re.search(r'inet_addr\("127\.|inet_pton\(AF_INET6, "::1"|inet_pton\(AF_INET6, "::ffff:127\.', line):
            bad.append(line.strip()[:200])
    return bad


def _ctrl_c_reaches_it() -> None:
    """The proxy takes SIGINT as a user's Ctrl-C, however the check was started: a shell without job
    control starts a background command (`nohup make openclaw-check &`) with SIGINT ignored, every
    child inherits that, and the proxy would never see the SIGINT the check sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Check:
    def __init__(self, args):
        self.args = args
        self.failures: list[str] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="openclaw-check-"))
        self.tag = self.tmp.name
        self.run_dir = self.tmp / "proxy-run"
        self.home = self.tmp / "home"
        self.proxy: subprocess.Popen | None = None
        self.proxy_pids: set[int] = set()

    def check(self, ok: bool, what: str) -> bool:
        print(f"  [{'ok' if ok else 'FAIL'}] {what}", flush=True)
        if not ok:
            self.failures.append(what)
        return ok

    def env(self, **extra) -> dict:
        env = {k: v for k, v in os.environ.items()
               if k.lower() not in ("http_proxy", "https_proxy", "all_proxy") and k != "NEXTSTATE_PROXY_API_KEY"}
        env.update({MARKER: self.tag, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}, **extra)
        return env

    # -- the proxy --------------------------------------------------------------------------------------
    def start_proxy(self, api_key: str) -> str:
        cmd = [sys.executable, "-m", "harness.run", "+experiment=personal_proxy", "hints=next_state", "signal=opd",
               "mode.teacher=policy", "mode.batch_samples=2", "mode.iterations=0", "mode.port=0",
               f"model.max_prompt_tokens={MAX_PROMPT_TOKENS}", f"hydra.run.dir={self.run_dir}"]
        print(f"[openclaw-check] starting the proxy: {' '.join(cmd[1:])}", flush=True)
        self.proxy_log = (self.tmp / "proxy.out").open("w")
        self.proxy = subprocess.Popen(cmd, cwd=REPO, stdout=self.proxy_log, stderr=subprocess.STDOUT,
                                      env=self.env(NEXTSTATE_RESULTS=str(self.tmp / "results"),
                                                   NEXTSTATE_PROXY_API_KEY=api_key),
                                      preexec_fn=_ctrl_c_reaches_it)
        t0 = time.monotonic()
        while time.monotonic() - t0 < PROXY_START_S:
            if self.proxy.poll() is not None:
                raise RuntimeError(f"the proxy exited ({self.proxy.returncode}) before serving:\n{self.tail()}")
            try:
                url = json.loads((self.run_dir / "proxy.json").read_text())["url"]
                health(url)
                print(f"[openclaw-check] proxy at {url} after {time.monotonic() - t0:.0f} s", flush=True)
                return url
            except (OSError, ValueError, KeyError):
                time.sleep(2)
        raise RuntimeError(f"the proxy did not serve within {PROXY_START_S} s:\n{self.tail()}")

    def tail(self, n: int = 30) -> str:
        return "\n".join((self.tmp / "proxy.out").read_text(errors="replace").splitlines()[-n:])

    def note_proxy_pids(self) -> None:
        if self.proxy is not None and self.proxy.poll() is None:
            self.proxy_pids |= children_of(self.proxy.pid) | {self.proxy.pid}

    def prompt_tokens(self, session: str | None) -> int | None:
        """The prompt length of `session`'s waiting reply (the latest turn), from the proxy's journal."""
        n = None
        try:
            for line in (self.run_dir / "sessions.jsonl").read_text().splitlines():
                rec = json.loads(line)
                if "pending" in rec and (session is None or rec["pending"] == session):
                    n = len(rec["generation"]["prompt_token_ids"])
        except (OSError, ValueError, KeyError):
            pass
        return n

    # -- OpenClaw ---------------------------------------------------------------------------------------
    def turn(self, no: int, message: str, session: str) -> tuple[str, float, str]:
        """One `openclaw agent --local` process: (the reply it showed, seconds, its log lines)."""
        oc = self.args.openclaw_dir
        state = self.home / ".openclaw"
        env = self.env(HOME=str(self.home), OPENCLAW_HOME=str(self.home), OPENCLAW_STATE_DIR=str(state),
                       OPENCLAW_CONFIG_PATH=str(state / "openclaw.json"), TMPDIR=str(self.tmp / "tmp"),
                       PATH=f"{oc / 'bin'}:{os.environ.get('PATH', '')}", NO_COLOR="1")
        cmd = [str(oc / "node_modules" / ".bin" / "openclaw"), "agent", "--local", "--session-id", session,
               "--message", message, "--timeout", str(TURN_S)]
        trace = self.tmp / f"turn-{no:02d}.strace"
        if self.strace:
            cmd = [self.strace, "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", str(trace), *cmd]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, cwd=self.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=TURN_S + 60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            self.check(False, f"turn {no}: OpenClaw did not finish within {TURN_S + 60} s")
        secs = time.monotonic() - t0
        try:  # anything the turn left running in its process group
            os.killpg(p.pid, signal.SIGKILL)
            self.check(False, f"turn {no}: OpenClaw left processes running after it exited")
        except ProcessLookupError:
            pass
        (self.tmp / f"turn-{no:02d}.out").write_text(out)
        (self.tmp / f"turn-{no:02d}.err").write_text(err)
        lines = [ANSI.sub("", x) for x in out.splitlines()]
        reply = "\n".join(x for x in lines if not LOG_LINE.match(x)).strip()
        logs = "\n".join([x for x in lines if LOG_LINE.match(x)] + [ANSI.sub("", err)])
        self.check(p.returncode == 0, f"turn {no}: exit {p.returncode}")
        if self.strace and trace.exists():
            bad = loopback_only(trace)
            if bad:
                self.check(False, f"turn {no}: OpenClaw connected beyond 127.0.0.1: {bad[:3]}")
        return reply, secs, logs

    # -- the check --------------------------------------------------------------------------------------
    def run(self) -> int:
        oc = self.args.openclaw_dir / "node_modules" / ".bin" / "openclaw"
        if not oc.exists():
            print(f"[openclaw-check] no OpenClaw at {oc} (make openclaw-check installs it)", file=sys.stderr)
            return 2
        self.strace = shutil.which("strace")
        print(f"[openclaw-check] work dir {self.tmp}; OpenClaw {self.args.openclaw_dir}; "
              f"{'strace watches its connections' if self.strace else 'no strace: connections not watched'}",
              flush=True)
        api_key = secrets.token_urlsafe(24)
        url = self.start_proxy(api_key)
        self.note_proxy_pids()
        state = self.home / ".openclaw"
        state.mkdir(parents=True)
        (self.tmp / "tmp").mkdir()
        (state / "openclaw.json").write_text(json.dumps(openclaw_config(url, api_key, self.home), indent=2))
        session = f"nextstate-check-{secrets.token_hex(4)}"
        before = health(url)
        print(f"[openclaw-check] {len(TURNS)} turns of OpenClaw session {session}", flush=True)
        rows, logs_all, proxy_session = [], [], None
        for no, message in enumerate(TURNS, 1):
            reply, secs, logs = self.turn(no, message, session)
            logs_all.append(logs)
            h = health(url)
            self.note_proxy_pids()
            if proxy_session is None:  # the proxy's own id for the conversation (it got no header)
                pending = [json.loads(x) for x in (self.run_dir / "sessions.jsonl").read_text().splitlines()
                           if '"pending"' in x]
                proxy_session = pending[-1]["pending"] if pending else None
            tokens = self.prompt_tokens(proxy_session)
            rows.append((no, secs, h, tokens))
            shown = reply.replace("\n", " ")
            print(f"  turn {no:2d} {secs:5.1f} s  prompt {tokens} tok  served {h['served'] - before['served']}  "
                  f"steps {h['steps_recorded'] - before['steps_recorded']}  version {h['version']}  "
                  f"| user: {message}\n           reply: {shown[:150]}{'...' if len(shown) > 150 else ''}", flush=True)
            self.check(bool(reply), f"turn {no}: a reply was shown")
            self.check(not HTTP_409.search(logs), f"turn {no}: no 409 in OpenClaw's output")
            self.check(h["steps_recorded"] - before["steps_recorded"] == no - 1,
                       f"turn {no}: {no - 1} steps recorded (got {h['steps_recorded'] - before['steps_recorded']})")
        after = health(url)
        self.check(after["unanswered"] == before["unanswered"], f"no reply left unanswered ({after['unanswered']})")
        served = after["served"] - before["served"]
        print(f"[openclaw-check] {served} requests for {len(TURNS)} turns "
              f"({served - len(TURNS)} besides the turns themselves)", flush=True)
        train_log = self.run_dir / "train_log.jsonl"
        t0 = time.monotonic()
        while not (train_log.exists() and train_log.read_text().strip()) and time.monotonic() - t0 < UPDATE_WAIT_S:
            if self.proxy.poll() is not None:
                break
            time.sleep(5)
        updates = [json.loads(x) for x in train_log.read_text().splitlines()] if train_log.exists() else []
        final = health(url) if self.proxy.poll() is None else {}
        self.check(len(updates) >= 1, f"updates trained: {len(updates)} (policy version {final.get('version')}); "
                   + "; ".join(f"update {u['version']}: {u['samples']} samples, {u['update_s']:.0f} s, "
                               f"loss {u['loss']:.4f}" for u in updates))
        self.check(self.proxy.poll() is None and final.get("status") == "ok",
                   f"the proxy is still up after the last turn ({final})")
        self.note_proxy_pids()
        self.stop_proxy()
        oc_log = self.home / "openclaw.log"
        self.check(not (oc_log.exists() and HTTP_409.search(oc_log.read_text(errors="replace"))),
                   "no 409 in OpenClaw's log")
        self.check(not HTTP_409.search((self.run_dir / "run.log").read_text(errors="replace")),
                   "no 409 in the proxy's run.log")
        secs = [r[1] for r in rows]
        tokens = [r[3] for r in rows if r[3] is not None]
        print(f"[openclaw-check] seconds per turn: mean {sum(secs) / len(secs):.1f}, min {min(secs):.1f}, "
              f"max {max(secs):.1f}; prompt tokens {min(tokens, default=0)}..{max(tokens, default=0)}; "
              f"steps recorded {after['steps_recorded'] - before['steps_recorded']}; updates {len(updates)}",
              flush=True)
        return 0 if not self.failures else 1

    def stop_proxy(self) -> None:
        """SIGINT to the pid in proxy.json, as a user's Ctrl-C; then nothing of the check may be left."""
        if self.proxy is None:
            return
        if self.proxy.poll() is None:
            try:
                pid = json.loads((self.run_dir / "proxy.json").read_text())["pid"]
            except (OSError, ValueError, KeyError):
                pid = self.proxy.pid
            t0 = time.monotonic()
            os.kill(pid, signal.SIGINT)
            try:
                self.proxy.wait(STOP_S)
                self.check(True, f"the proxy stopped on SIGINT in {time.monotonic() - t0:.0f} s")
            except subprocess.TimeoutExpired:
                self.check(False, f"the proxy did not stop within {STOP_S} s of SIGINT")
                self.proxy.kill()
                self.proxy.wait()
        time.sleep(3)  # Ray's workers notice their raylet is gone
        left = {p for p in self.proxy_pids if Path(f"/proc/{p}").exists()} | set(marked_processes(self.tag))
        if left:
            self.check(False, f"processes left behind: {sorted(left)}; killed")
            kill_all(left)
        else:
            self.check(True, "no process left behind")
        self.proxy = None

    def cleanup(self) -> None:
        if self.proxy is not None:  # the check itself failed midway
            self.note_proxy_pids()
            self.stop_proxy()
        kill_all(marked_processes(self.tag))
        if self.args.keep:
            print(f"[openclaw-check] kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--openclaw-dir", type=Path, default=default_openclaw_dir(),
                    help="where Node 24 and openclaw are installed (make openclaw-check installs them)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work dir (logs, the proxy's run dir, OpenClaw's home)")
    args = ap.parse_args()
    check = Check(args)
    code = 1
    try:
        code = check.run()
    except (RuntimeError, OSError) as e:
        print(f"[openclaw-check] {e}", file=sys.stderr)
        check.failures.append(str(e).splitlines()[0])
    except KeyboardInterrupt:
        print("[openclaw-check] interrupted", file=sys.stderr)
        check.failures.append("interrupted")
    finally:
        check.cleanup()
    if check.failures:
        print(f"[openclaw-check] FAILED: {len(check.failures)} check(s): " + "; ".join(check.failures))
        return 1
    print("[openclaw-check] PASSED: a stock OpenClaw trained the model through the proxy")
    return code


if __name__ == "__main__":
    sys.exit(main())
