"""bfcl-eval's verdict on a single-turn answer: its own `ast_checker`, imported and called as the
package ships it (with `Language.PYTHON`, as BFCL grades every single-turn category the env offers).
"""
from __future__ import annotations

import functools
from types import ModuleType

from envs.toolcall.bfcl.suite import NO_CALL_EXPECTED, answers, bfcl_home, entries


@functools.cache
def checker_module() -> ModuleType:
    """bfcl-eval's `ast_checker` module. Its import pulls in every model SDK bfcl-eval knows (~4-6 s),
    so it is imported on first use; the env's `prepare()` calls this before the clock starts."""
    bfcl_home()
    from bfcl_eval.eval_checker.ast_eval import ast_checker

    return ast_checker


def check_single(category: str, entry_id: str, calls: list[tuple[str, dict]] | None, model: str) -> dict:
    """bfcl-eval's verdict on one single-turn answer: `calls` are (name, arguments) pairs, named as the
    checker reads them; `calls=None` means no decodable call."""
    if category in NO_CALL_EXPECTED:  # BFCL's relevance runner: success iff no call was decoded
        if not calls:
            return {"valid": True}
        return {"valid": False, "error": ["Valid syntax. Successfully decode AST when it should not."],
                "error_type": "irrelevance_error:decoder_success"}
    if not calls:
        return {"valid": False, "error": ["no function call decoded"], "error_type": "ast_decoder:decoder_failed"}
    checker = checker_module()
    try:
        return checker.ast_checker(entries(category, False)[entry_id]["function"],
                                   [{name: args} for name, args in calls], answers(category)[entry_id],
                                   checker.Language.PYTHON, category, model)
    except Exception as e:  # the checker chokes on some shapes of wrong output: that is a wrong answer
        return {"valid": False, "error": [f"checker raised {type(e).__name__}: {e}"],
                "error_type": "checker_exception"}
