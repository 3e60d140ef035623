"""The verdicts on the paper's claims, judged by the seed spread (``studies.verdicts``)."""

import pandas as pd

from pages import page_values
from studies import verdicts


def test_a_claim_is_judged_by_the_seed_spread():
    def runs(*accuracies):
        return pd.DataFrame({"test_acc": accuracies})

    claim = verdicts.claim
    assert claim("a above b", runs(90, 91, 92), runs(80, 81, 82)) == (
        "- a above b: reproduced (difference +10.0 points, standard error 0.8)"
    )
    assert "not distinguishable" in claim("c", runs(80, 82), runs(81, 83))
    assert "consistent" in claim("c", runs(80, 82), runs(81, 83), not_below=True)
    assert "**not reproduced: reversed**" in claim("d", runs(70, 71), runs(80, 81))
    assert claim("e", runs(70), runs(80, 81)) == "- e: one seed: no verdict"
    assert verdicts.judge([], [1.0, 2.0]) == "not run"
    assert verdicts.judge([3.0, 4.0], [1.0, 2.0], digits=2, unit="degrees") == (
        "reproduced (difference +2.00 degrees, standard error 0.71)"
    )


def test_a_claim_names_the_runs_that_ended_training_at_chance():
    # a diverged baseline makes "above it" easy: the verdict line says so
    learned = pd.DataFrame({"test_acc": [80.0, 82.0, 81.0], "seed": [0, 1, 2]})
    learned["train_at_chance"] = False
    baseline = pd.DataFrame({"test_acc": [11.0, 70.0, 12.0], "seed": [0, 1, 2]})
    baseline["train_at_chance"] = [True, False, True]
    line = verdicts.claim("learned above MAP FC", learned, baseline)
    assert line.startswith("- learned above MAP FC: reproduced (difference +50.0 points")
    assert line.endswith("; **the second side's seeds 0, 2 ended training at chance**")
    assert page_values.VERDICT.match(line)  # still counted by the page's lead
    assert "chance" not in verdicts.claim("c", learned, learned)
    assert verdicts.within("e", learned, baseline).endswith("0, 2 ended training at chance**")
    assert "chance" not in verdicts.claim("d", pd.DataFrame({"test_acc": [1.0, 2.0]}), learned)
    assert "the first side's seeds 0, 2" in verdicts.claim("b", baseline, learned)
    baseline["train_at_chance"] = [False, True, False]
    assert verdicts.claim("f", learned, baseline).endswith(
        "side's seed 1 ended training at chance**"
    )


def test_an_nll_claim_counts_lower_as_better():
    def runs(*nlls):
        return pd.DataFrame({"test_nll": nlls})

    assert verdicts.claim("a", runs(0.30, 0.31), runs(0.50, 0.52), column="test_nll") == (
        "- a: reproduced (difference +0.205 nats, standard error 0.011)"
    )
    assert "reversed" in verdicts.claim("b", runs(0.5, 0.52), runs(0.3, 0.31), column="test_nll")


def test_within_holds_up_to_the_given_points_below_and_fails_beyond():
    def runs(*accuracies):
        return pd.DataFrame({"test_acc": accuracies})

    assert verdicts.within("a", runs(79.5, 79.7), runs(80.0, 80.4)) == (
        "- a: holds (difference -0.6 points, standard error 0.2)"
    )
    assert verdicts.within("b", runs(78.0, 78.2), runs(80.0, 80.4)).startswith("- b: fails")
    assert verdicts.within("c", runs(82.0, 83.0), runs(80.0, 80.4)).startswith("- c: holds")
