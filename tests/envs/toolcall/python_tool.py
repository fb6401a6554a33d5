"""Calling the `run_python` tool of a tool-call env as an agent does, and reading its JSON result."""
import json


def run_python(env, code: str) -> dict:
    call = json.dumps({"name": "run_python", "arguments": {"code": code}})
    obs, reward, terminated, truncated, info = env.step(f"<tool_call>{call}</tool_call>")
    assert not info.get("infra_failure"), info
    return json.loads(obs.split("<tool_response>\n", 1)[1].rsplit("\n</tool_response>", 1)[0])
