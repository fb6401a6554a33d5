"""bfcl-eval's `ast_checker` on single-turn answers, with each entry's inputs prepared once.

`entry_inputs` looks up an entry's docs, ground truth and tool specs at its first answer, and converts
dotted function names the way the checker would on every call (for checker models that want them
with underscores), so the checker itself decides every verdict but has no conversion left to do.
"""
from __future__ import annotations

import functools
import re
from typing import NamedTuple

from .toolcall_bfcl import NO_CALL_EXPECTED, answers, ast_checker, entries, specs
from .toolcall_validate import ToolSpec


class EntryInputs(NamedTuple):
    """What judging one entry's answers needs, looked up once (at its first answer)."""
    functions: list[dict]  # BFCL's un-hinted docs, as its checker reads them
    answer: list | None  # the ground truth (None for irrelevance)
    spec: dict[str, ToolSpec]
    aliases: dict[str, str]


@functools.lru_cache(maxsize=None)
def entry_inputs(category: str, entry_id: str, model: str) -> EntryInputs:
    """Looked up once per entry and checker model (the lookups and the conversion are per entry)."""
    spec, aliases = specs(category, entry_id)
    functions = entries(category, False)[entry_id]["function"]
    if category in NO_CALL_EXPECTED:
        return EntryInputs(functions, None, spec, aliases)
    answer = answers(category)[entry_id]
    if _renames_dots(model):
        functions, answer = _dotless(functions, answer)
    return EntryInputs(functions, answer, spec, aliases)


@functools.lru_cache(maxsize=None)
def _renames_dots(model: str) -> bool:
    """Whether bfcl-eval's checker reads a dotted function name with underscores for this model (its
    `convert_func_name`, a regex substitution per function per check)."""
    ast_checker()  # the import, with bfcl-eval's home set
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING

    config = MODEL_CONFIG_MAPPING.get(model.replace("_", "/"))
    return bool(config is not None and config.underscore_to_dot)


def _dotless(functions: list[dict], answer: list) -> tuple[list[dict], list]:
    """The docs and the ground truth with their names converted once, as the checker converts them on
    every call, so that its conversion has nothing left to do: the same names are compared and the
    same messages written. Only where the renaming is one-to-one, so every lookup by name finds the
    same function; otherwise the originals."""
    if not all(isinstance(a, dict) for a in answer):
        return functions, answer
    names = {f["name"] for f in functions} | {name for a in answer for name in a}
    renamed = {name: re.sub(r"\.", "_", name) for name in names}
    if not any("." in name for name in names) or len(set(renamed.values())) != len(names):
        return functions, answer
    return ([{**f, "name": renamed[f["name"]]} for f in functions],
            [{renamed[name]: value for name, value in a.items()} for a in answer])


def check_single(category: str, entry_id: str, calls: list[tuple[str, dict]] | None, model: str) -> dict:
    """bfcl-eval's verdict on one single-turn answer: `calls` are (name, arguments) pairs, named as the
    checker reads them; `calls=None` means no decodable call."""
    if category in NO_CALL_EXPECTED:  # BFCL's relevance runner: success iff no call was decoded
        return {"valid": not calls, **({} if not calls else {
            "error": ["Valid syntax. Successfully decode AST when it should not."],
            "error_type": "irrelevance_error:decoder_success"})}
    if not calls:
        return {"valid": False, "error": ["no function call decoded"], "error_type": "ast_decoder:decoder_failed"}
    return checked(entry_inputs(category, entry_id, model), calls, category, model)


def checked(entry: EntryInputs, calls: list[tuple[str, dict]], category: str, model: str) -> dict:
    """`check_single` for an AST category, on the entry's prepared inputs (the hot path)."""
    checker, python = ast_checker()
    try:
        return checker(entry.functions, [{name: args} for name, args in calls], entry.answer, python, category,
                       model)
    except Exception as e:  # the checker chokes on some shapes of wrong output: that is a wrong answer
        return {"valid": False, "error": [f"checker raised {type(e).__name__}: {e}"],
                "error_type": "checker_exception"}
