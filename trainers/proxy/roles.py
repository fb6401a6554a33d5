"""`mode=proxy`'s parts as the Ray loops' roles: the OpenAI-compatible endpoint is the rollout worker
(its HTTP server, sessions and journal live in that actor; each completed step is a one-step
group), and its judge reads each session's tools from the group rather than from shared memory."""
from __future__ import annotations

import threading

from agents.serving.asgi_server import ServerThread, listening_socket
from nextstate.atomic import write_json_atomic
from trainers.async_roles import RunSpec
from trainers.checkpoint import checkpoint_state
from trainers.proxy.http import make_app
from trainers.proxy.journal import SessionJournal
from trainers.proxy.request import special_tokens_of
from trainers.proxy.server import Proxy
from trainers.proxy.sessions import SessionBook
from trainers.roles import Judge
from trainers.setup import rollout_sampling


class ProxyEndpoint:
    """The endpoint, serving from the first `produce` on (it needs the loops' gate)."""

    def __init__(self, spec: RunSpec):
        job, self.tc, self.run_dir = spec.parts()
        self.driver_pid = spec.driver_pid
        self.policy = spec.policy.connect()
        self.model_cfg = job.model
        self.sampling = rollout_sampling(self.model_cfg, self.tc)
        saved = checkpoint_state(self.run_dir / "checkpoint") or {}
        self.book = SessionBook(self.tc.max_sessions, SessionJournal(self.run_dir / "sessions.jsonl"),
                                first_step=saved.get("open_from", 0))
        if self.book.restored_pending or self.book.restored_steps:
            print(f"[proxy] resumed {self.book.restored_pending} replies waiting for their next state and "
                  f"{self.book.restored_steps} steps not yet trained on", flush=True)
        # bound now: the port is taken while the loops start (connections queue in its backlog)
        self.sock = listening_socket(self.tc.host, self.tc.port, self.tc.limits().backlog)
        self.server = None
        self.proxy = None
        self._lock = threading.Lock()

    def _serve(self, gate) -> None:
        tc = self.tc
        self.proxy = Proxy(self.policy, gate, self.book, self.sampling, self.model_cfg.name, tc.api_key,
                           max_tokens_cap=tc.max_tokens_cap, special_tokens=special_tokens_of(self.policy.tokenizer))
        self.server = ServerThread(make_app(self.proxy, tc.limits()), self.sock, tc.limits(), "proxy-http")
        url = f"http://{tc.host}:{self.server.port}/v1"
        write_json_atomic(self.run_dir / "proxy.json",  # pid: the run's own process, the one to signal
                          {"url": url, "pid": self.driver_pid, "model": self.model_cfg.name})
        print(f"[proxy] OpenAI-compatible endpoint at {url} (headers: X-Session-Id, X-Turn-Type: main|side, "
              f"X-Session-Done); training on every {tc.batch_samples} judged replies", flush=True)
        if not tc.api_key and tc.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"[proxy] warning: {tc.host} is reachable from other machines and no mode.api_key is set "
                  "(NEXTSTATE_PROXY_API_KEY): anyone who can reach it can train this model", flush=True)

    def produce(self, group_no: int, gate):
        with self._lock:
            if self.proxy is None:
                self._serve(gate)
        return self.proxy.next_step(group_no, gate)

    def stats(self) -> dict:
        return self.proxy.stats() if self.proxy else {}

    def compact(self, open_from: int) -> None:
        self.book.compact(open_from)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self.sock.close()
        (self.run_dir / "proxy.json").unlink(missing_ok=True)


class ProxyJudge(Judge):
    """A judge whose groups carry their session's tools: (trajectories, {session: tools})."""

    def judge(self, group_no: int, group):
        trajs, tools = group
        self.feedback.tools.update(tools)
        return super().judge(group_no, trajs)
