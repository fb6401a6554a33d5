"""What the tool-call tests share: the bundled suite, and calling the `run_python` tool as an agent does."""
import json

from envs.toolcall.bundled import load_bundled
from tests.paths import ROOT

SUITE = load_bundled(ROOT / "envs" / "tasks" / "toolcall")


def run_python(env, code: str) -> dict:
    call = json.dumps({"name": "run_python", "arguments": {"code": code}})
    obs, reward, terminated, truncated, info = env.step(f"<tool_call>{call}</tool_call>")
    assert not info.get("infra_failure"), info
    return json.loads(obs.split("<tool_response>\n", 1)[1].rsplit("\n</tool_response>", 1)[0])
