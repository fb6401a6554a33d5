"""Persona suites for `nextstate/Chat-v0`: users with a hidden preference, graded on the first reply.
Fast: no Docker, no model."""
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the environments)
from agents.base import NoopAgent, OracleAgent
from agents.rollout import run_episode
from envs.chat.env import ChatEnv, ChatEnvConfig
from envs.chat.personas import PERSONAS_DIR, available, digest, earlier, load_persona, load_personas, read_persona
from envs.chat.user import CHECKS, GIVE_UP
from envs.task_formats import TaskFormatError
from tests.paths import ROOT

NAMES = ("student", "teacher", "brief", "casual")
FILES = {name: yaml.safe_load((PERSONAS_DIR / f"{name}.yaml").read_text()) for name in available()}
SUITES = {name: load_persona(PERSONAS_DIR / f"{name}.yaml") for name in available()}


@pytest.fixture(scope="module")
def persona_config(env_config):
    return lambda persona: env_config("chat", f"env.persona={persona}")


@pytest.fixture(scope="module")
def config(persona_config) -> ChatEnvConfig:
    return persona_config("all")


@pytest.fixture
def env(config):
    e = ChatEnv(config, tasks=[t for suite in SUITES.values() for t in suite])  # loaded once, above
    yield e
    e.close()


def _phrasing_of(want: dict, complaint: str) -> int:
    """Which of a want's phrasings (templates with {slot} placeholders) a filled complaint came from."""
    hits = [i for i, p in enumerate(want["complaints"])
            if re.fullmatch(re.sub(r"\\\{[a-z_.\\]+\\\}", ".+?", re.escape(p)), complaint)]
    assert len(hits) == 1, (complaint, want["complaints"])
    return hits[0]


def test_the_named_personas_are_bundled():
    assert set(NAMES) <= set(available())


@pytest.mark.parametrize("name", available())
def test_a_suite_is_sized_split_and_unseen_at_test_time(name):
    tasks = SUITES[name]
    train = [t for t in tasks if t.split == "train"]
    test = [t for t in tasks if t.split == "test"]
    assert len(train) >= 60 and len(test) >= 30 and len(train) + len(test) == len(tasks)
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert train[7].task_id == f"{name}-train-007" and test[12].task_id == f"{name}-test-012"
    assert not {t.instruction for t in train} & {t.instruction for t in test}
    assert len({t.instruction for t in tasks}) == len(tasks)  # no request twice
    for t in tasks:
        (request,) = t.data["requests"]  # a task is one request
        assert t.instruction == request.text and t.data["persona"] == name and name in t.tags
        assert len(request.wants) == len(FILES[name]["wants"]) == len(t.data["gates"])
        assert request.first_unmet(request.reference) is None, (t.task_id, request.reference)


@pytest.mark.parametrize("name", available())
def test_complaints_vary_across_requests_and_never_appear_in_the_request(name, config):
    tasks = SUITES[name]
    for i, want in enumerate(FILES[name]["wants"]):
        assert len(want["complaints"]) >= 3
        used = {_phrasing_of(want, t.data["requests"][0].wants[i].complaint) for t in tasks}
        assert used == set(range(len(want["complaints"]))), (name, i, used)  # every phrasing is used
    for t in tasks:
        for w in t.data["requests"][0].wants:
            assert w.complaint.lower() not in t.instruction.lower()
            assert w.complaint.lower() not in config.system_prompt.lower()


@pytest.mark.parametrize("name", available())
def test_every_request_of_a_split_asks_a_different_question(name, env):
    """Each request draws its own entry of the `distinct` slot (the question, topic or work): a split
    of n requests is n questions, none of them (nor their topics) in the other split, and each
    reference reply gets the full grade from its own persona."""
    d = FILES[name]
    slot = d["distinct"]
    pools = {split: d[f"{split}_slots"][slot] for split in ("train", "test")}
    for split, at_least in (("train", 60), ("test", 30)):
        tasks = [t for t in SUITES[name] if t.split == split]
        asked = []
        for t in tasks:
            (entry,) = [e for e in pools[split] if e["text"] in t.instruction]
            asked.append(entry["text"])
        assert len(set(asked)) == len(tasks) == d[f"n_{split}"] >= at_least, (name, split, len(set(asked)))
        for t in tasks:
            env.reset(options={"task_id": t.task_id})
            _, reward, term, _, info = env.step(t.data["requests"][0].reference)
            assert (reward, term, info["first_reply_met"]) == (1.0, True, True), t.task_id
    for field in ("text", "topic"):
        if field in pools["train"][0]:
            train, test = ({e[field] for e in pools[s]} for s in ("train", "test"))
            assert not train & test, (name, field, train & test)


def _fingerprint(tasks) -> str:
    """Everything a task is: ids, split, tags, grading, and every request with its wants (instructions
    and complaints included), thanks and reference."""
    rows = [[t.task_id, t.instruction, t.split, t.difficulty, list(t.tags), t.data["persona"], t.data["grading"],
             list(t.data["gates"]), [[r.text, [[w.check, w.value, w.complaint, w.instruction] for w in r.wants],
                                      r.thanks, r.reference] for r in t.data["requests"]]] for t in tasks]
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


# what the version-2 files generate, recorded (results/personalization/ was measured on these):
# (digest, fingerprint) per persona
V2 = {"brief": ("ce9f8bf3d54aac0c", "7b2bd0e486fbd1cf"), "casual": ("ac8ff93c602e26b6", "1d30904dbbf8590f"),
      "student": ("15843de1e3a0560c", "12c565715e46723f"), "teacher": ("aa62b382a00a5853", "9c963379c32f3e58")}


def test_version_2_stays_loadable_and_generates_the_same_tasks(persona_config):
    assert earlier() == [f"v2/{n}" for n in sorted(V2)]
    for name, (digest_v2, fingerprint_v2) in V2.items():
        tasks = load_personas(f"v2/{name}")
        assert (digest(tasks), _fingerprint(tasks)) == (digest_v2, fingerprint_v2), name
        assert len(tasks) == 90 and tasks[0].task_id == f"{name}-train-000" and tasks[0].data["persona"] == name
        assert digest(SUITES[name]) != digest_v2  # the default is version 3
    env = ChatEnv(persona_config("v2/brief"), split="test")
    assert [t.instruction for t in env.tasks] == [t.instruction for t in load_personas("v2/brief", "test")]
    pool = [q["text"] for q in yaml.safe_load((PERSONAS_DIR / "v2" / "brief.yaml").read_text())["test_slots"]["q"]]
    assert len({q for t in env.tasks for q in pool if q in t.instruction}) == 12  # v2 drew with replacement
    assert {t.data["persona"] for t in ChatEnv(persona_config('"v2/brief,brief"')).tasks} == {"brief"}
    env.close()


def test_generation_is_deterministic_across_loads_and_processes():
    again = load_personas("all")
    first = [t for name in available() for t in SUITES[name]]
    assert [(t.task_id, t.data["requests"]) for t in again] == [(t.task_id, t.data["requests"]) for t in first]
    # another hash seed: a generator relying on hash() or set order would print other digests
    code = "from envs.chat.personas import *; print([read_persona(PERSONAS_DIR / f'{n}.yaml')[1] for n in available()])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONHASHSEED="12345"))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str([FILES[n]["digest"] for n in available()])


def test_a_changed_word_list_fails_on_load_asking_for_a_version_bump(tmp_path):
    text = (PERSONAS_DIR / "student.yaml").read_text()
    path = tmp_path / "student.yaml"
    path.write_text(text.replace("due: [tomorrow,", "due: [the day after tomorrow,"))
    with pytest.raises(TaskFormatError, match=r"student\.yaml: the generated requests changed .*bump `version`"):
        load_persona(path)
    _, actual, recorded = read_persona(path)
    assert recorded == FILES["student"]["digest"] != actual
    path.write_text(text.replace(f"digest: {recorded}", f"digest: {actual}"))  # a new digest alone ...
    with pytest.raises(TaskFormatError, match="digest"):
        load_persona(path)  # ... with the old words is caught too


def _tiny(**changes) -> dict:
    d = {"name": "tiny", "version": 1, "seed": 0, "n_train": 2, "n_test": 1,
         "wants": [{"contains_all": ["{who}"], "gate": True,
                    "complaints": ["Say {who}.", "Name {who}!", "{who}, please."]},
                   {"contains_any": ["{fruit.keys}"], "complaints": ["A fruit.", "Fruit?", "Which fruit?"]},
                   {"contains_any": ["hi"], "complaints": ["Greet me.", "Hello?", "Say hi."]}],
         "templates": ["Tell {who} about {fruit.name}."], "slots": {"who": ["Ann", "Bea"]},
         "train_slots": {"fruit": [{"name": "apples", "keys": ["apple", "pome"]}]},
         "test_slots": {"fruit": [{"name": "pears", "keys": ["pear"]}]},
         "reference": "hi {who}, {fruit.keys}s are great", "digest": "0"}
    d.update(changes)
    return d


def _write(tmp_path, d: dict, *, digest=True) -> Path:
    path = tmp_path / f"{d['name']}.yaml"
    path.write_text(yaml.safe_dump(d))
    if digest:
        path.write_text(yaml.safe_dump(dict(d, digest=read_persona(path)[1])))
    return path


def test_want_values_are_filled_per_request_and_shared_checks_are_numbered(tmp_path, persona_config):
    tasks = load_persona(_write(tmp_path, _tiny()))
    assert sorted(t.instruction for t in tasks[:2]) == ["Tell Ann about apples.", "Tell Bea about apples."]
    assert tasks[2].instruction in ("Tell Ann about pears.", "Tell Bea about pears.")
    for t in tasks:
        (request,) = t.data["requests"]
        who = "Ann" if "Ann" in t.instruction else "Bea"
        assert request.wants[0].value == [who] and request.wants[0].complaint in (f"Say {who}.", f"Name {who}!",
                                                                                  f"{who}, please.")
        assert request.wants[1].value == (["apple", "pome"] if t.split == "train" else ["pear"])
        assert request.reference == f"hi {who}, {request.wants[1].value[0]}s are great"
    config = persona_config("student")
    env = ChatEnv(config, tasks=tasks)
    env.reset(options={"task_id": "tiny-train-000"})
    who = "Ann" if "Ann" in tasks[0].instruction else "Bea"
    assert env.step(f"hello {who}")[4]["next_state"].fields["unmet"] == "contains_any"  # the name only: 1 of 3
    _, reward, term, _, info = env.step(f"hello {who}")
    assert info["first_reply_wants"] == {"contains_all": True, "contains_any_1": False, "contains_any_2": False}
    assert reward == pytest.approx(1 / 3) and term and info["corrections"] == 2  # patience 2: "hello" again


BAD = [
    (dict(wants=[{"max_wordz": 3, "complaints": ["a", "b", "c"]}]), "want 0 must be one of"),
    (dict(wants=[{"max_words": 3, "complaints": ["a", "b"]}]), "at least 3 different phrasings"),
    (dict(wants=[{"max_words": 3, "complaints": ["a", "a", "b"]}]), "at least 3 different phrasings"),
    (dict(wants=[{"max_words": "three", "complaints": ["a", "b", "c"]}]), "max_words takes a int"),
    (dict(wants=[{"matches": "(", "complaints": ["a", "b", "c"]}]), "bad pattern"),
    (dict(wants=[{"max_words": 2, "complaints": ["a", "b", "c"]}]), "reference misses the want max_words"),
    (dict(wants=[{"max_words": 9, "gate": "yes", "complaints": ["a", "b", "c"]}]), "gate is true or false"),
    (dict(wants=[{"max_words": 9, "not_in_request": True, "complaints": ["a", "b", "c"]}]),
     "not_in_request applies to contains_any only"),
    (dict(wants=[{"contains_any": ["{who}"], "not_in_request": True, "complaints": ["a", "b", "c"]}]),
     "every phrase of a not_in_request want"),
    (dict(templates=["About {fruit.name} and {colour}."]), r"\{colour\} .* is not a slot"),
    (dict(templates=["About {fruit}."]), r"write \{fruit.<field>\}"),
    (dict(test_slots={"fruit": [{"name": "apples", "keys": ["apple"]}]}), "test requests are also train requests"),
    (dict(test_slots={"veg": [{"name": "kale", "keys": ["kale"]}]}), "must name the same slots"),
    (dict(n_train=5), "only 2 different train requests for n_train=5"),
    (dict(distinct="fruit"), r"n_train=2 but train_slots.fruit has only 1 entries: each train request draws a "
                             r"different fruit"),
    (dict(distinct="who"), "distinct names a slot of train_slots and test_slots, got 'who'"),
    (dict(distinct="fruit", n_train=1, test_slots={"fruit": [{"name": "pears", "keys": ["pear"]}] * 2}),
     "test_slots.fruit lists .* twice"),
    (dict(distinct="fruit", n_train=1, test_slots={"fruit": [{"name": "apples", "keys": ["apple", "pome"]}]}),
     "fruit entries in both train_slots and test_slots: 1"),
    (dict(n_test=0), "n_test must be a positive integer"),
    (dict(version="1"), "version must be a positive integer"),
    (dict(name="other"), "name 'other' must match the file name"),
    (dict(digest=None), "digest must be a non-empty string"),
    (dict(templates=["Tell {who} about {fruit.name}. Greet me. Hello? Say hi."]), "request says its own complaint"),
]


@pytest.mark.parametrize("changes,reason", BAD, ids=[r for _, r in BAD])
def test_a_malformed_persona_is_a_clear_error_naming_the_file(tmp_path, changes, reason):
    d = _tiny(**changes)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(TaskFormatError, match=rf"tiny\.yaml: .*{reason}"):
        load_persona(path)


def test_a_distinct_slot_is_drawn_without_replacement(tmp_path):
    fruits = [{"name": n, "keys": [n[:-1]]} for n in ("apples", "plums", "figs", "limes")]
    tasks = load_persona(_write(tmp_path, _tiny(distinct="fruit", n_train=4, train_slots={"fruit": fruits})))
    asked = [t.instruction.split(" about ")[1] for t in tasks if t.split == "train"]
    assert sorted(asked) == ["apples.", "figs.", "limes.", "plums."]  # each once, in a seeded order


def test_missing_keys_and_bad_yaml_are_clear_errors(tmp_path):
    path = tmp_path / "tiny.yaml"
    d = _tiny()
    del d["reference"]
    path.write_text(yaml.safe_dump(dict(d, colour="red")))
    with pytest.raises(TaskFormatError, match=r"missing keys \['reference'\], unknown keys \['colour'\]"):
        load_persona(path)
    path.write_text("name: [tiny\n")
    with pytest.raises(TaskFormatError, match="invalid YAML"):
        load_persona(path)


def test_a_not_in_request_want_drops_the_phrases_the_request_already_says(tmp_path):
    wants = [{"contains_any": ["{fruit.keys}", "{who}"], "not_in_request": True, "gate": True,
              "complaints": ["A fruit.", "Fruit?", "Which fruit?"]}]
    tiny = _tiny(wants=wants, templates=["Tell {who} about {fruit.keys}s."], reference="hi {who}: pome, perry",
                 test_slots={"fruit": [{"name": "pears", "keys": ["pear", "perry"]}]})
    requests = [t.data["requests"][0] for t in load_persona(_write(tmp_path, tiny))]
    # "apple" / "pear" and the name are in the request, so they do not count
    assert [r.wants[0].value for r in requests] == [["pome"], ["pome"], ["perry"]]
    assert all(r.first_unmet(r.text) is not None for r in requests)  # echoing the request misses it


@pytest.mark.parametrize("name", ["brief", "casual", "student"])
def test_red_team_echoing_the_request_is_not_on_topic(env, name):
    """The attack an RL policy found: restate the question in a short sentence ("The
    quickest way to cool down a hot room is to cool down a hot room.") and meet every want of `brief`
    without answering. Every request of the personas whose gate is "answers the question" must fail
    its gate on the request itself, reworded or not; `teacher` is left out on purpose: its gate is
    "cites the work", which the request quotes."""
    for task in SUITES[name]:
        (request,) = task.data["requests"]
        question = request.text.rstrip("?!. ")
        for echo in (request.text, f"The answer to {question} is {question}.", f"hey, {question.lower()}"):
            env.reset(options={"task_id": task.task_id})
            info = env.step(echo)[4]
            assert info["next_state"].fields["unmet"] == "contains_any", (task.task_id, echo)


def test_the_no_list_and_encouragement_rules_check_what_they_say():
    no_list = FILES["student"]["wants"][2]["matches"]
    assert FILES["brief"]["wants"][2]["matches"] == no_list
    met = CHECKS["matches"][0]
    for listed in ("- one\n- two", "intro:\n* a", "1. first", "steps:\n  2) second", "\u2022 dot"):
        assert not met(listed, no_list), listed
    for plain in ("a sentence - with a dash", "3.14 is pi", "**bold** words", "line one\nline two"):
        assert met(plain, no_list), plain
    cheer = FILES["teacher"]["wants"][3]["matches"]
    assert met("Nice essay, Maya. Keep it up!", cheer) and met("well done", cheer)
    assert not met("Well done!\nSee me after class.", cheer) and not met("Keep it up, but shorter.", cheer)


def test_the_reference_gets_outcome_1_and_thanks(env):
    task = env._by_id["teacher-test-004"]
    (request,) = task.data["requests"]
    obs, info = env.reset(options={"task_id": task.task_id})
    assert obs == request.text and info["persona"] == "teacher"
    obs, reward, term, trunc, info = env.step(request.reference)
    assert obs == FILES["teacher"]["thanks"] and (reward, term, trunc) == (1.0, True, False)
    assert info["success"] and info["outcome"] == 1.0 and info["first_reply_met"] and info["corrections"] == 0
    assert info["first_reply_wants"] == {"contains_all": True, "contains_any": True, "max_words": True, "matches": True}


def test_the_next_state_carries_every_unmet_wish_for_the_oracle_hint(env):
    """`hints=wish` reads `fields["wish"]`: each missed want's instruction, in order; none once all are met."""
    task = env._by_id["casual-test-000"]
    (request,) = task.data["requests"]
    env.reset(options={"task_id": task.task_id})
    info = env.step("Sure! " + " ".join(["word"] * 40))[4]
    assert info["next_state"].fields["wish"] == ('Answer the question itself, with the concrete answer. '
                                                 'Open the reply with "hey". Keep it under 30 words.')
    assert "hey" not in info["next_state"].text.lower().split()  # the complaint names one want; the wish all
    # what the complaint itself says, stated plainly (what a trained hint extractor learns to give)
    assert info["next_state"].fields["named_wish"] == "Answer the question itself, with the concrete answer."
    env.reset(options={"task_id": task.task_id})
    fields = env.step(request.reference)[4]["next_state"].fields
    assert fields["wish"] == "" and fields["named_wish"] == ""
    assert all(w.instruction for suite in SUITES.values() for w in suite[0].data["requests"][0].wants)


def test_a_reply_meeting_2_of_4_wants_scores_half_and_hears_one_phrasing(env):
    task = env._by_id["brief-train-003"]
    (request,) = task.data["requests"]
    env.reset(options={"task_id": task.task_id})
    reply = f"- {request.reference}\n- Anything else?"  # on topic and short, but a list with a question
    obs, reward, term, _, info = env.step(reply)
    assert (reward, term) == (0.0, False) and info["step_label"] == {"satisfied": False}
    assert obs in FILES["brief"]["wants"][1]["complaints"]  # no_questions is the first unmet want
    assert info["next_state"].fields["unmet"] == "no_questions"
    obs, reward, term, _, info = env.step(request.reference)  # corrected: thanked, but graded on the first
    assert obs == FILES["brief"]["thanks"] and term and info["step_label"] == {"satisfied": True}
    assert reward == info["outcome"] == 0.5 and not info["success"] and not info["first_reply_met"]
    assert info["first_reply_wants"] == {"contains_any": True, "no_questions": False, "matches": False,
                                         "max_words": True}
    assert info["corrections"] == 1 and info["requests_met"] == 1


def test_an_off_topic_or_empty_first_reply_scores_0_and_the_user_gives_up(env):
    task = env._by_id["brief-test-000"]
    env.reset(options={"task_id": task.task_id})
    _, reward, _, _, info = env.step("ok.")  # short, no question, no list: 3 of 4, but misses the gate
    assert info["next_state"].fields["unmet"] == "contains_any"
    obs, reward, term, _, info = env.step("ok.")
    assert obs.endswith(GIVE_UP) and term and reward == info["outcome"] == 0.0
    assert info["first_reply_wants"] == {"contains_any": False, "no_questions": True, "matches": True,
                                         "max_words": True}
    assert info["corrections"] == 2 and not info["success"]
    env.reset(options={"task_id": "student-test-000"})
    env.step("   ")
    _, _, _, _, info = env.step(env._by_id["student-test-000"].data["requests"][0].reference)
    assert info["outcome"] == 0.0 and not any(info["first_reply_wants"].values()) and info["corrections"] == 1


def test_the_teacher_wants_the_student_named_in_the_request(env):
    for task in [t for t in SUITES["teacher"] if t.split == "train"][:5]:
        (request,) = task.data["requests"]
        (name,) = request.wants[0].value
        assert name in task.instruction and name in request.reference
        env.reset(options={"task_id": task.task_id})
        obs, _, _, _, info = env.step(request.reference.replace(name, "there"))
        assert name in obs and info["next_state"].fields["unmet"] == "contains_all"
        assert env.finalize()[0] == 0.75  # the other three are met


def test_gym_make_with_a_persona_and_the_trajectory_keeps_the_grade(persona_config):
    e = gym.make("nextstate/Chat-v0", config=persona_config("student"), split="test")
    assert {t.data["persona"] for t in e.unwrapped.tasks} == {"student"} and len(e.unwrapped.tasks) >= 30
    task = e.unwrapped.tasks[0]
    traj = run_episode(e, OracleAgent(), task, "")
    assert traj.success and traj.outcome == 1.0 and len(traj.steps) == 1
    assert traj.info == {"first_reply_met": True, "corrections": 0, "first_reply_wants": {
        "contains_any": True, "contains_none": True, "matches": True, "max_words": True, "lowercase": True}}
    traj = run_episode(e, NoopAgent(), task, "")
    assert not traj.success and traj.outcome == 0.0 and traj.info["corrections"] == 2
    assert traj.info["first_reply_met"] is False and traj.info["first_reply_wants"]["contains_any"] is False
    check_env(e.unwrapped, skip_render_check=True)
    e.close()


def test_the_default_env_still_runs_the_bundled_sessions_and_keeps_no_grade():
    e = gym.make("nextstate/Chat-v0")
    assert e.unwrapped.config.persona is None and not any("grading" in t.data for t in e.unwrapped.tasks)
    task = e.unwrapped.tasks[0]
    traj = run_episode(e, OracleAgent(), task, "")
    assert traj.success and traj.info == {}
    e.close()


def test_several_personas_or_all_and_an_unknown_one_is_a_clear_error(persona_config):
    two = ChatEnv(persona_config('"teacher,brief"'), split="test").tasks
    assert {t.data["persona"] for t in two} == {"teacher", "brief"} and {t.split for t in two} == {"test"}
    assert len(ChatEnv(persona_config("all")).tasks) == sum(len(s) for s in SUITES.values())
    with pytest.raises(ValueError, match="unknown persona nurse: choose from brief, casual, student, teacher"):
        ChatEnv(persona_config("nurse"))
