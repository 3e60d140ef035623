"""The paper's claims checked on rows of runs, by the seed spread.

A claim "A above B" holds where the mean difference exceeds twice its standard error over
seeds, is "not distinguishable" within it and "reversed" below it; a claim "A not below B" is
"consistent" within two standard errors (which a large seed spread makes a weak statement: the
standard error is printed beside it); with one seed no verdict is possible.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.generated_docs.common import difference
from laplace_equivariance.app import summary


@dataclass(frozen=True)
class Claim:
    """``better`` (trained from ``better_start``) is above ``worse`` (trained from
    ``worse_start``) in test accuracy on ``dataset`` (or, with ``not_below``, at least not
    below it)."""

    text: str
    dataset: str
    better: tuple[str, str]
    worse: tuple[str, str]
    not_below: bool = False
    better_start: str = "mixed"
    worse_start: str = "mixed"
    burnin: int | None = None
    """The learned rows' burn-in, where a section holds rows of several."""
    better_variants: tuple[str, ...] = ()
    """The ``better`` row's variants besides its start (``summary.Row.variants``, e.g.
    ``("temperature 2",)``); the ``worse`` row has none."""

    def verdict(self, rows: list[summary.Row]) -> str:
        """The claim checked on ``rows``."""
        a = self.row(rows, self.better, self.better_start, self.better_variants)
        b = self.row(rows, self.worse, self.worse_start)
        if a is None or b is None:
            return "not run"
        return judge(a.accuracy(), b.accuracy(), "points", self.not_below)

    def row(
        self,
        rows: list[summary.Row],
        model_method: tuple[str, str],
        start: str,
        variants: tuple[str, ...] = (),
    ) -> summary.Row | None:
        """The row of ``model_method`` trained from ``start`` with ``variants`` and no other.

        Raises:
            ValueError: If several rows fit (give ``burnin``).
        """
        found = []
        for r in rows:
            s = summary.LATER_OPTIONS | r.settings
            plain = r.variants() == [*summary.start_words(s | {"start": start}), *variants]
            learned = s["method"] == "marglik"
            if (
                (s["dataset"], s["model"], s["method"], s["start"])
                == (self.dataset, *model_method, start)
                and plain
                and (self.burnin is None or not learned or s["burnin"] == self.burnin)
            ):
                found.append(r)
        if len(found) > 1:
            raise ValueError(
                f"Claim {self.text!r}: {len(found)} rows of {model_method} started {start}; "
                "give the claim a burnin."
            )
        return found[0] if found else None


def judge(
    x: list[float], y: list[float], unit: str, not_below: bool = False, digits: int = 1
) -> str:
    """Verdict on "``x`` above ``y``" (or "not below" with ``not_below``) by the seed spread."""
    if not x or not y:
        return "not run"
    if len(x) < 2 or len(y) < 2:
        return "one seed: no verdict"
    diff, error = difference(x, y)
    figures = f"difference {diff:+.{digits}f} {unit}, standard error {error:.{digits}f}"
    if diff > 2 * error:
        return f"reproduced ({figures})"
    if diff >= -2 * error:
        status = "consistent (within two standard errors)" if not_below else "not distinguishable"
        return f"{status} ({figures})"
    return f"**not reproduced: reversed** ({figures})"
