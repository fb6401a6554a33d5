"""The proxy's journal (trainers/proxy/journal.py) is an exact inverse of its writes: whatever a
session book has done (replies waiting, steps recorded, sessions done or forgotten, rewrites after
updates, restarts, a line torn by a kill), replaying the file gives the same waiting replies, in the
same order, and the same untrained steps. Checked after every operation of seeded random
interleavings (plain `random`; no hypothesis), so every prefix is a kill point."""
import os
import random
import stat

import pytest

from nextstate.types import Generation
from trainers.proxy.journal import SessionJournal
from trainers.proxy.sessions import SessionBook

U = lambda text: {"role": "user", "content": text}  # noqa: E731
A = lambda text: {"role": "assistant", "content": text}  # noqa: E731
TOOLS = [{"type": "function", "function": {"name": "w"}}]


def gen(text):
    return Generation(text=text, token_ids=[len(text), 6], logprobs=[-0.5, -0.25], prompt_token_ids=[1, 2, 3])


def _steps(steps):
    return [(s.no, s.session, s.version, s.step.to_dict(), s.tools) for s in steps]


def _check(path, book, trained, emitted):
    """The file, replayed from the first untrained step, is what the book holds in memory."""
    replayed = SessionJournal(path).replay(trained)
    assert list(replayed.pending.items()) == list(book._pending.items())
    assert _steps(replayed.steps) == _steps(s for s in emitted if s.no >= trained)


def _interleave(path, rng: random.Random, ops: int):
    book = SessionBook(max_sessions=3, journal=SessionJournal(path))
    trained, emitted, history, n = 0, [], {}, 0  # history: session -> its messages up to its waiting reply
    for _ in range(ops):
        op = rng.choice(["ask", "ask", "answer", "answer", "answer", "done", "side", "train", "compact", "restart",
                         "torn"])
        n += 1
        waiting = list(book._pending)
        if op == "ask" or (op in ("answer", "done") and not waiting):
            session = f"s{rng.randrange(6)}"
            if session in book._pending:
                continue  # a new conversation on a waiting session is refused (test_red_team_proxy.py)
            history[session] = [U(f"q{n}")]
            book.record(session, "main", history[session], gen(f"r{n}"), book.next_no // 3,
                        tools=TOOLS if rng.random() < 0.3 else None)
        elif op in ("answer", "done"):
            session = rng.choice(waiting)
            reply = book._pending[session].generation.text
            after = {"role": "tool", "content": f"t{n}"} if rng.random() < 0.3 else U(f"a{n}")
            history[session] = [*history[session], A(reply), after]
            before = book.next_no
            book.record(session, "main", history[session], gen(f"r{n}"), book.next_no // 3, done=op == "done")
            assert book.next_no == before + 1
            emitted.append(list(book.steps.queue)[-1])
        elif op == "side" and waiting:
            book.record(rng.choice(waiting), "side", [U("title?")], gen("T"), 0)
        elif op == "train":  # an update's checkpoint took the steps so far; killed before the rewrite
            trained = rng.randint(trained, book.next_no)
        elif op == "compact":
            trained = rng.randint(trained, book.next_no)
            book.compact(trained)
        elif op == "restart":
            book = SessionBook(max_sessions=3, journal=SessionJournal(path), first_step=trained)
        elif op == "torn":  # killed mid-line: the line is not a record, and the next write drops it
            with open(path, "a") as f:
                f.write('{"pending": "s0", "index": 0, "messa')
            book = SessionBook(max_sessions=3, journal=SessionJournal(path), first_step=trained)
        _check(path, book, trained, emitted)
    return book


@pytest.mark.red_team
@pytest.mark.parametrize("seed", range(40))
def test_every_prefix_of_any_interleaving_replays_to_the_state_in_memory(tmp_path, seed):
    """The red-team finding: after kill -9 and resume=, 16 of 25 waiting replies were gone, because the
    rewrite put waiting replies before untrained steps and a step line ends its session's waiting reply."""
    _interleave(tmp_path / "sessions.jsonl", random.Random(seed), ops=80)


@pytest.mark.red_team
def test_a_rewrite_keeps_a_reply_waiting_in_a_session_with_an_untrained_step(tmp_path):
    path = tmp_path / "sessions.jsonl"
    book = SessionBook(journal=SessionJournal(path))
    book.record("a", "main", [U("q")], gen("r1"), 0)
    book.record("a", "main", [U("q"), A("r1"), U("no")], gen("r2"), 0)  # step 0, not trained yet; r2 waits
    book.compact(keep_from=0)
    again = SessionBook(journal=SessionJournal(path))
    assert (again.restored_pending, again.restored_steps) == (1, 1)
    assert again._pending["a"].generation.text == "r2"


@pytest.mark.red_team
def test_the_journal_is_never_readable_by_others(tmp_path):
    path = tmp_path / "sessions.jsonl"
    old = os.umask(0o022)
    try:
        book = SessionBook(journal=SessionJournal(path))
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # from creation, before anything is written
        book.record("a", "main", [U("my secret question")], gen("r"), 0)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        book.compact(keep_from=0)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        path.chmod(0o644)  # left by an older version
        SessionJournal(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        os.umask(old)


def test_an_endpoint_restarted_mid_run_hands_the_loops_the_step_they_ask_for(tmp_path):
    """Ray restarts an endpoint killed mid-run (e.g. for memory): its book replays the journal from
    the last checkpoint, steps the loops already hold included. They ask for the next group only, so
    the steps before it are skipped: none reaches the trainer twice, and the run goes on."""
    from agents.serving.transformers_policy import SamplingConfig
    from trainers.gate import Gate
    from trainers.proxy.server import Proxy

    path = tmp_path / "sessions.jsonl"
    book = SessionBook(journal=SessionJournal(path))
    for i in range(4):  # four sessions, each answered once: steps 0-3
        book.record(f"s{i}", "main", [U(f"q{i}")], gen(f"r{i}"), 0)
        book.record(f"s{i}", "main", [U(f"q{i}"), A(f"r{i}"), U(f"a{i}")], gen(f"r{i}'"), 0)
    restarted = SessionBook(journal=SessionJournal(path), first_step=0)  # the last checkpoint: open_from 0
    proxy = Proxy(None, Gate(0), restarted, SamplingConfig(16, 1.0, 1.0, 512), "m", prompt_tokens=lambda m, t: 0)
    _, (trajs, _) = proxy.next_step(2, proxy.gate)  # the loops got steps 0 and 1 before the endpoint died
    assert trajs[0].task_id == "s2"
    _, (trajs, _) = proxy.next_step(3, proxy.gate)
    assert trajs[0].task_id == "s3"
