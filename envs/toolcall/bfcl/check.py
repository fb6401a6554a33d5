"""bfcl-eval's `ast_checker` on single-turn answers, with what it redoes on every check done once.

On every check, bfcl-eval's checker converts each documented function name for the checker model
(`convert_func_name`, a regex substitution), standardizes every string it compares, the model's and
the ground truth's (`standardize_string`, another), and compares `language` with `Language.JAVA`,
`.JAVASCRIPT` and `.PYTHON` four times per parameter (an Enum member lookup is a descriptor call in
Python 3.11, ~3x a plain attribute). The env therefore runs its own instance of bfcl-eval's checker
module (loaded from bfcl-eval's file, so the checker's code is bfcl-eval's, line for line;
bfcl-eval's own module, which anyone else in the process may call, is left as it is) in which:
- `convert_func_name` is memoized: its arguments are a documented name and the model;
- `standardize_string` is memoized (bounded): a pure function of one string, and the strings repeat,
  the ground truth's on every check of an entry and the model's across the samples of one prompt;
- `Language` is a plain namespace holding bfcl-eval's own members, so every comparison is the same.
The checker decides every verdict and writes every message; tests/envs/toolcall/bfcl/test_toolcall_bfcl.py compares
them with bfcl-eval's own module on every category's perturbed answers.
"""
from __future__ import annotations

import functools
import importlib.util
from types import ModuleType, SimpleNamespace
from typing import NamedTuple

from envs.toolcall.bfcl.suite import NO_CALL_EXPECTED, answers, ast_checker, entries, specs
from envs.toolcall.validate import ToolSpec


class EntryInputs(NamedTuple):
    """What judging one entry's answers needs, looked up once (at its first answer)."""
    functions: list[dict]  # BFCL's un-hinted docs, as its checker reads them
    answer: list | None  # the ground truth (None for irrelevance)
    spec: dict[str, ToolSpec]
    aliases: dict[str, str]


@functools.lru_cache(maxsize=None)
def entry_inputs(category: str, entry_id: str, model: str) -> EntryInputs:
    """Looked up once per entry and checker model."""
    spec, aliases = specs(category, entry_id)
    functions = entries(category, False)[entry_id]["function"]
    answer = None if category in NO_CALL_EXPECTED else answers(category)[entry_id]
    return EntryInputs(functions, answer, spec, aliases)


@functools.lru_cache(maxsize=1)
def checker_module() -> ModuleType:
    """This env's instance of bfcl-eval's `ast_checker` module (see the module docstring)."""
    ast_checker()  # bfcl-eval imported, with its home set
    from bfcl_eval.eval_checker.ast_eval import ast_checker as stock

    spec = importlib.util.spec_from_file_location(f"{__name__}._bfcl_ast_checker", stock.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.convert_func_name = functools.lru_cache(maxsize=None)(module.convert_func_name)
    module.standardize_string = functools.lru_cache(maxsize=1 << 16)(module.standardize_string)
    module.Language = SimpleNamespace(**{member.name: member for member in module.Language})
    return module


@functools.lru_cache(maxsize=1)
def _checker():
    """The instance's `ast_checker` and bfcl-eval's Language.PYTHON, for the hot path."""
    return checker_module().ast_checker, ast_checker()[1]


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
    checker, python = _checker()
    try:
        return checker(entry.functions, [{name: args} for name, args in calls], entry.answer, python, category,
                       model)
    except Exception as e:  # the checker chokes on some shapes of wrong output: that is a wrong answer
        return {"valid": False, "error": [f"checker raised {type(e).__name__}: {e}"],
                "error_type": "checker_exception"}
