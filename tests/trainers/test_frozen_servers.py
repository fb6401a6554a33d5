"""Which frozen servers a run starts, and on which weights. A trained judge (`judge.model`) is for the
PRM votes and the model hints only: the OPD teacher and the KL reference stay the initial weights.
Were the judge checkpoint the one frozen server, a run with a trained judge would distil from the
judge."""
from pathlib import Path
from types import SimpleNamespace

import pytest

from nextstate.config import conf_defaults
from trainers.feedback.registry import HINTERS, JUDGES
from trainers.setup import frozen_servers
from trainers.signals import SignalConfig

INIT = Path("/cache/smollm2-135m-instruct")


@pytest.fixture
def trained(tmp_path) -> Path:
    """A judge checkpoint dir as mode=sft_judge leaves it (config.json marks a model dir)."""
    judge = tmp_path / "sft_judge" / "judge"
    judge.mkdir(parents=True)
    (judge / "config.json").write_text("{}")
    return judge


def servers(signal: str, judge: str, hints: str, judge_model=None, teacher="frozen", kl_coef=0.0):
    return frozen_servers(conf_defaults("signal", signal, SignalConfig), JUDGES[judge], HINTERS[hints],
                          SimpleNamespace(teacher=teacher, kl_coef=kl_coef),
                          str(judge_model) if judge_model else None, INIT)


def test_a_trained_judge_gets_its_own_server_and_the_teacher_stays_the_initial_weights(trained):
    assert servers("prm_opd", "model", "model", trained) == (INIT, trained)
    assert servers("prm", "model", "model", trained) == (None, trained)  # no teacher, no KL
    assert servers("prm", "model", "model", trained, kl_coef=0.1) == (INIT, trained)
    assert servers("opd", "model", "model", trained, teacher="policy") == (None, trained)


def test_one_shared_server_when_the_judge_is_the_initial_weights():
    assert servers("prm_opd", "model", "model") == (INIT, None)
    assert servers("prm_opd", "model", "model", INIT) == (INIT, None)
    assert servers("prm", "model", "wish") == (INIT, None)
    assert servers("prm_opd", "oracle", "wish") == (INIT, None)  # the frozen teacher alone


def test_no_frozen_server_when_nothing_reads_one(trained):
    assert servers("outcome", "model", "model", trained) == (None, None)
    assert servers("prm_opd", "oracle", "wish", trained, teacher="policy") == (None, None)


def test_a_judge_model_that_is_not_a_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="is not a model dir.*mode=sft_judge"):
        servers("prm", "model", "model", tmp_path / "typo")
