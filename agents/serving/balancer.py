"""Which of several serving endpoints takes the next request. No HTTP here: the client asks for a
server, sends, gives it back, and reports a server it could not reach.

- Least requests in flight wins, ties go round-robin: servers of one model answer at about the same
  speed, so the queue length is the load; round-robin keeps sequential callers (one request at a
  time, all ties) spread too.
- A session sticks to its server while that server is alive, so the server's prefix cache still
  holds the conversation so far (an episode's prompts share everything up to the last turn).
- A dropped server stays out (a server that died mid-run rarely comes back healthy with the same
  weights); it is reported once on stderr, and the reasons stay readable for the run's log."""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from contextlib import contextmanager

MAX_SESSIONS = 10_000  # remembered session -> server pins, oldest forgotten first (a pin is a hint)


class Balancer:
    def __init__(self, urls: list[str]):
        self.urls = list(dict.fromkeys(u.rstrip("/") for u in urls))  # order kept, duplicates once
        if not self.urls:
            raise ValueError("no serving endpoint given")
        self.in_flight = dict.fromkeys(self.urls, 0)
        self.dropped: dict[str, str] = {}  # url -> why it left the rotation
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._cursor = 0  # where the round-robin over tied servers starts
        self._lock = threading.Lock()

    @property
    def live(self) -> list[str]:
        return [u for u in self.urls if u not in self.dropped]

    def acquire(self, session: str | None = None) -> str | None:
        """The server for the next request (counted in flight until `release`), or None if none is left."""
        with self._lock:
            live = self.live
            if not live:
                return None
            url = self._sessions.get(session) if session is not None else None
            if url is None or url in self.dropped:
                url = self._least_loaded(live)
            if session is not None:
                self._sessions[session] = url
                self._sessions.move_to_end(session)
                if len(self._sessions) > MAX_SESSIONS:
                    self._sessions.popitem(last=False)
            self.in_flight[url] += 1
            return url

    def _least_loaded(self, live: list[str]) -> str:
        n = len(self.urls)
        order = [self.urls[(self._cursor + i) % n] for i in range(n)]
        fewest = min(self.in_flight[u] for u in live)
        url = next(u for u in order if u in live and self.in_flight[u] == fewest)
        self._cursor = (self.urls.index(url) + 1) % n
        return url

    def release(self, url: str) -> None:
        with self._lock:
            self.in_flight[url] -= 1

    @contextmanager
    def lease(self, session: str | None = None):
        """`with balancer.lease(session) as url:` (url is None when no server is left)."""
        url = self.acquire(session)
        try:
            yield url
        finally:
            if url is not None:
                self.release(url)

    def drop(self, url: str, reason: str) -> None:
        """Take `url` out of the rotation; the first report of it goes to stderr, later ones are quiet."""
        with self._lock:
            if url in self.dropped:
                return
            self.dropped[url] = reason
            left = len(self.live)
        print(f"[serving] dropped {url} from the rotation ({left} server(s) left): {reason}",
              file=sys.stderr, flush=True)
