"""How often the judge's -1 agrees with the env's verifiable step labels (a tool call that matches
the reference, a command that exited 0, ...). A step is 'bad' when any of its labels is False."""
from __future__ import annotations


def judge_accuracy(pairs: list) -> dict:
    """`pairs`: [(step score, {label: bool}), ...]. Precision and recall of the judge's negative
    verdicts (score < 0) against bad steps; None where undefined (no negatives / no bad steps)."""
    tp = fp = fn = 0
    for score, labels in pairs:
        bad = not all(bool(v) for v in labels.values())
        neg = score is not None and score < 0
        tp += neg and bad
        fp += neg and not bad
        fn += bad and not neg
    return {"precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None, "n": len(pairs)}
