"""The PNG files a run writes beside its ``results.json``.

- ``training.png``: the training loss per epoch and the objective of the priors' fits (the
  negative log marginal likelihood per hyperparameter step; for the invariant-weights network
  its method's objective per epoch);
- ``symmetry.png``: the learned structure, each path's relative effective parameters per layer
  (:func:`~laplace_equivariance.diagnostics.plot_symmetry`; learned relaxed networks only);
- ``eta.png``: the invariant-weights network's learned transformation magnitudes per epoch.

Every figure is closed once saved: a sweep trains many runs in one process.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from laplace_equivariance.app.run_config import RunConfig
from laplace_equivariance.diagnostics import plot_symmetry
from laplace_equivariance.invariance import INVARIANCES

__all__ = ["write_run_plots"]


def _pyplot():
    """Pyplot on the non-interactive Agg backend unless one is chosen already."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import pyplot as plt

    return plt


def _save(figure: Any, path: Path) -> None:
    """Write ``figure`` to ``path`` and close it."""
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    _pyplot().close(figure)


def _plot_training(
    losses: list[float],
    objective: list[float],
    path: Path,
    labels: tuple[str, str] = ("hyperparameter step", "-log marginal likelihood"),
) -> None:
    figure, axes = _pyplot().subplots(1, 2, figsize=(8, 3))
    axes[0].plot(range(1, len(losses) + 1), losses)
    axes[0].set(xlabel="epoch", ylabel="training loss")
    axes[1].plot(objective)
    axes[1].set(xlabel=labels[0], ylabel=labels[1])
    _save(figure, path)


def _plot_eta(eta: list[list[float]], names: Sequence[str], path: Path) -> None:
    figure, axis = _pyplot().subplots(figsize=(4, 3))
    for i, name in enumerate(names):
        axis.plot(range(1, len(eta) + 1), [row[i] for row in eta], label=name)
    axis.set(xlabel="epoch", ylabel="eta")
    axis.legend()
    _save(figure, path)


def write_run_plots(
    results: dict[str, Any], config: RunConfig, out: Path, learned_structure: bool
) -> None:
    """Write a run's PNG files into its folder ``out``.

    Args:
        results: The run's ``results.json`` content (``losses``, ``neg_log_marglik``, and
            ``symmetry`` or ``invariance`` where the run has them).
        config: The run's configuration.
        out: The run folder.
        learned_structure: Whether to draw ``symmetry.png`` (a relaxed network whose priors
            were learned).
    """
    if learned_structure:
        title = f"{config.model} on {config.dataset}"
        _save(plot_symmetry(results["symmetry"], title=title), out / "symmetry.png")
    if "invariance" in results:
        generators = INVARIANCES[config.invariance]
        _plot_eta(results["invariance"]["eta"], generators, out / "eta.png")
        labels = ("epoch", f"-{config.method.value} objective / N")
        _plot_training(results["losses"], results["neg_log_marglik"], out / "training.png", labels)
    else:
        _plot_training(results["losses"], results["neg_log_marglik"], out / "training.png")
