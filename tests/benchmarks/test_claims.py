"""The paper's claims judged on rows of runs by the seed spread."""

import dataclasses

import pytest

from benchmarks.generated_docs import claims


class Row:
    """What a claim reads of a summary row."""

    def __init__(
        self, model, method, accuracies, start="mixed", burnin=10, balanced=False, temperature=1
    ):
        self.settings = {"dataset": "d", "model": model, "method": method, "start": start}
        self.settings |= {"burnin": burnin, "balance_factors": balanced}
        self.temperature = temperature
        self._accuracies = accuracies

    def accuracy(self):
        return self._accuracies

    def variants(self):
        named = ["balanced"] if self.settings["balance_factors"] else []
        start = self.settings["start"]
        named += [f"{start} start"] if start != "mixed" else []
        return named + ([f"temperature {self.temperature:g}"] if self.temperature != 1 else [])


def test_claims_are_judged_by_the_seed_spread():
    claim = claims.Claim("conv above fc", "d", ("conv", "map"), ("fc", "map"))
    rows = [Row("conv", "map", [90.0, 91.0, 92.0]), Row("fc", "map", [80.0, 81.0, 82.0])]
    assert claim.verdict(rows).startswith("reproduced")
    rows = [Row("conv", "map", [80.0, 85.0, 90.0]), Row("fc", "map", [81.0, 86.0, 88.0])]
    assert claim.verdict(rows).startswith("not distinguishable")
    rows = [Row("conv", "map", [70.0, 71.0, 72.0]), Row("fc", "map", [80.0, 81.0, 82.0])]
    assert "reversed" in claim.verdict(rows)
    assert claim.verdict(rows[:1]) == "not run"
    assert claim.verdict([Row("conv", "map", [90.0]), rows[1]]) == "one seed: no verdict"


def test_claims_compare_rows_by_start_and_refuse_to_guess_between_burn_ins():
    claim = claims.Claim(
        "held above equivariant",
        "d",
        ("f-fc+conv", "marglik"),
        ("f-fc+conv", "marglik"),
        better_start="held",
        worse_start="equivariant",
    )
    held = Row("f-fc+conv", "marglik", [92.0, 93.0, 94.0], start="held")
    equivariant = Row("f-fc+conv", "marglik", [80.0, 81.0, 82.0], start="equivariant")
    balanced = Row("f-fc+conv", "marglik", [99.0, 99.5, 99.9], "equivariant", balanced=True)
    assert claim.verdict([held, equivariant, balanced]).startswith("reproduced")
    assert claim.verdict([held, balanced]) == "not run"  # a variant is not the plain start
    short = Row("f-fc+conv", "marglik", [95.0, 96.0, 97.0], start="equivariant", burnin=5)
    with pytest.raises(ValueError, match="give the claim a burnin"):
        claim.verdict([held, equivariant, short])
    on_ten = dataclasses.replace(claim, burnin=10)
    assert on_ten.verdict([held, equivariant, short]).startswith("reproduced")


def test_claims_of_a_variant_compare_its_rows_with_the_plain_rows_of_the_other_side():
    claim = claims.Claim(
        "warm learned not below MAP",
        "d",
        ("f-fc+conv", "marglik"),
        ("f-fc+conv", "map"),
        not_below=True,
        better_start="held",
        better_variants=("temperature 2",),
    )
    plain = Row("f-fc+conv", "marglik", [70.0, 71.0, 72.0], start="held")
    warm = Row("f-fc+conv", "marglik", [90.0, 91.0, 92.0], start="held", temperature=2)
    map_row = Row("f-fc+conv", "map", [85.0, 86.0, 87.0])
    warm_map = Row("f-fc+conv", "map", [10.0, 11.0, 12.0], temperature=2)
    assert claim.verdict([plain, warm, map_row, warm_map]).startswith("reproduced")
    assert claim.verdict([plain, map_row]) == "not run"
    unvaried = dataclasses.replace(claim, better_variants=())
    assert unvaried.verdict([plain, warm, map_row]).startswith("**not reproduced")
