"""Where step-level feedback comes from: the model judge and hinter, the oracle ones, the judge's accuracy."""
