"""The GUI env's oracle: a scripted solver plays a private copy of the episode (same page, same
seed), and its replies are returned for the oracle agent to replay through the env's own step."""
from __future__ import annotations

import warnings

from envs.gui.a11y import parse_tree
from envs.gui.actions import parse_reply
from envs.gui.miniwob import METADATA_JS
from envs.gui.page import ActionError
from envs.gui.solvers import MINIWOB_SOLVERS, SolverError, StepsSolver
from envs.gui.transitions import first_line
from nextstate.types import Task


class GUIOracle:
    """Mixed into GUIEnv: uses its browser host, `_open`, `_url`, `_geometry` and config."""

    def _solver(self, task: Task):
        if task.data["suite"] == "miniwob":
            return MINIWOB_SOLVERS.get(task.data.get("page", task.task_id))
        steps = task.data.get("solution") or []
        return StepsSolver(steps) if steps else None

    async def _solve(self, task: Task, seed: int, url: str, solver) -> list[str]:
        session, goal, _, _ = await self._open(task, seed, url, None)
        history: list[str] = []
        try:
            for _ in range(self.config.oracle_max_steps):
                reply = solver(goal, parse_tree(session.tree), history)
                if reply is None:
                    break
                parsed = parse_reply(reply)
                if parsed.action is None:
                    raise SolverError(f"the solver produced {reply!r}: {parsed.error}")
                await session.act(parsed.action)
                history.append(reply)
                if task.data["suite"] == "miniwob" and (await session.page.evaluate(METADATA_JS))["done"]:
                    break
                await session.observe(None)
        finally:
            await session.tab.close()
        return history

    def reference_actions(self, task: Task) -> list[str]:
        """The scripted solver's replies for this episode, or ["done()"] where no solver exists.

        The solver runs on a private copy of the current episode (same page, same seed: pages and
        refs are deterministic) and its actions are returned for the oracle to replay here. Called
        for another task than the current episode's, it solves that task's seed-0 episode (a templated
        instance: its own seed)."""
        solver = self._solver(task)
        if solver is None:
            return ["done()"]
        if task.data.get("templated"):
            seed = task.data["seed"]  # the instance is its seed
        else:
            seed = self.seed_used if self.task is not None and self.task.task_id == task.task_id else 0
        try:
            actions = self._host.run(self._solve, task, seed, self._url(task), solver)
        except (SolverError, ActionError) as e:
            warnings.warn(f"no reference solution for {task.task_id}: {e}", stacklevel=2)
            return ["done()"]
        except Exception as e:  # noqa: BLE001  (browser trouble: the episode itself will report it)
            warnings.warn(f"reference solution for {task.task_id} failed: {first_line(e)}", stacklevel=2)
            return ["done()"]
        if self.config.prewarm and self.task is not None:
            (w, h), _ = self._geometry(self.task)
            self._host.prewarm(self._url(self.task), w, h)
        return actions + ["done()"]
