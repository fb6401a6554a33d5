"""Which frozen servers a run starts, and on which weights. A trained judge (`judge.model`) is for the
PRM votes and the model hints only: the OPD teacher and the KL reference stay the initial weights.
Before session 19 the judge checkpoint was the one frozen server, so a run with a trained judge
distilled from the judge."""
from pathlib import Path
from types import SimpleNamespace

from nextstate.config import conf_defaults
from trainers.feedback.registry import HINTERS, JUDGES
from trainers.setup import frozen_servers
from trainers.signals import SignalConfig

INIT = Path("/cache/smollm2-135m-instruct")
TRAINED = "/runs/sft_judge/judge"


def servers(signal: str, judge: str, hints: str, judge_model=None, teacher="frozen", kl_coef=0.0):
    return frozen_servers(conf_defaults("signal", signal, SignalConfig), JUDGES[judge], HINTERS[hints],
                          SimpleNamespace(teacher=teacher, kl_coef=kl_coef), judge_model, INIT)


def test_a_trained_judge_gets_its_own_server_and_the_teacher_stays_the_initial_weights():
    assert servers("prm_opd", "model", "model", TRAINED) == (INIT, Path(TRAINED))
    assert servers("prm", "model", "model", TRAINED) == (None, Path(TRAINED))  # no teacher, no KL
    assert servers("prm", "model", "model", TRAINED, kl_coef=0.1) == (INIT, Path(TRAINED))
    assert servers("opd", "model", "model", TRAINED, teacher="policy") == (None, Path(TRAINED))


def test_one_shared_server_when_the_judge_is_the_initial_weights():
    assert servers("prm_opd", "model", "model") == (INIT, None)
    assert servers("prm_opd", "model", "model", str(INIT)) == (INIT, None)
    assert servers("prm", "model", "wish") == (INIT, None)
    assert servers("prm_opd", "oracle", "wish") == (INIT, None)  # the frozen teacher alone


def test_no_frozen_server_when_nothing_reads_one():
    assert servers("outcome", "model", "model", TRAINED) == (None, None)
    assert servers("prm_opd", "oracle", "wish", TRAINED, teacher="policy") == (None, None)
