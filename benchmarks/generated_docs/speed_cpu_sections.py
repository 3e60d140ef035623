"""docs/speed.md's sections of the curvature and the fits, each from its benchmark's JSON.

The marginal-likelihood training against MAP, the KFAC fit against ASDL's, each fit against an
epoch (and before and after a change), the layers, the predictive's memory, the class passes,
CONV's input factor, the lengthscale gradient and several processes.
"""

from __future__ import annotations

import json
import statistics

from benchmarks.generated_docs.common import RESULTS, load_json, markdown_table
from benchmarks.generated_docs.speed_common import met, speed_section


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: ``"1 fit"``, ``"3 fits"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _floor(fit: dict) -> str:
    """A fit's floor (forward and backward passes only) in seconds and epochs."""
    return f"{fit['floor_s']:.2f} s, {fit['floor_over_epoch']:.1f}x"


def before_after_section() -> str:
    """The fits before and after a change, from alternating runs in one session."""
    folder = RESULTS / "fit_over_epoch-before-after"
    runs = sorted(
        folder.glob("*.json"), key=lambda p: (p.stem.split("-")[1], not p.stem.startswith("before"))
    )
    reports = [(p.stem, json.loads(p.read_text())) for p in runs]
    before = next(r["package_commit"] for name, r in reports if name.startswith("before"))
    first = reports[0][1]
    models = " ".join(dict.fromkeys(row["model"] for _, r in reports for row in r["rows"]))

    def median(side: str, kind: str) -> str:
        """Each model's median ``kind`` fit over the reports of ``side`` (before or after)."""
        fits = {
            model: [
                row[kind]["fit_s"]
                for name, r in reports
                if name.startswith(side)
                for row in r["rows"]
                if row["model"] == model
            ]
            for model in models.split()
        }
        return " / ".join(f"{m} {statistics.median(v):.2f} s" for m, v in fits.items())

    sentence = (
        f"{len(reports)} runs with {_count(first['repeats'], 'fit')} after the warm-up, the "
        f"older package at commit {before}; medians over the runs, before and after: exact GGN "
        f"fit {median('before', 'exact')} and {median('after', 'exact')}; Monte-Carlo fit "
        f"{median('before', 'mc')} and {median('after', 'mc')}."
    )
    return speed_section(
        "before-after",
        [first],
        runs=sentence,
        table=markdown_table(
            ["run", "code", "model", "epoch", "exact GGN fit", "MC Fisher fit", "eigenvalues"],
            [
                [
                    name,
                    r["package_commit"],
                    row["model"],
                    f"{row['epoch_s']:.2f} s",
                    f"{row['exact']['fit_s']:.2f} s, {row['exact']['fit_over_epoch']:.1f}x",
                    f"{row['mc']['fit_s']:.2f} s, {row['mc']['fit_over_epoch']:.1f}x",
                    f"{row['exact']['eigenvalues_s']:.2f} s",
                ]
                for name, r in reports
                for row in r["rows"]
            ],
        ),
    )


def predictive_section() -> str:
    """The GLM predictive's seconds and peak memory (``benchmarks.predictive_memory``)."""
    reports = [
        load_json(name)
        for name in (
            "predictive_memory-cpu-128.json",
            "predictive_memory-cpu.json",
            "predictive_memory-cpu-limit-1GiB.json",
        )
    ]
    return speed_section(
        "predictive",
        reports,
        markdown_table(
            ["images", "memory_limit", "examples a chunk", "call", "per image", "peak resident"],
            [
                [
                    str(r["images"]),
                    f"{r['memory_limit'] / 2**30:.0f} GiB",
                    str(r["examples_per_chunk"]),
                    f"{r['seconds']:.1f} s",
                    f"{r['seconds_per_image']:.2f} s",
                    f"{r['peak_resident_gib']:.1f} GiB",
                ]
                for r in reports
            ],
        ),
    )


def marglik_section() -> str:
    """The marginal-likelihood training against MAP, per fit batch size."""
    rows = []
    reports = [
        load_json(name)
        for name in ("marglik_speed-cpu.json", "marglik_speed-cpu-marglik-batch-256.json")
    ]
    for r in reports:
        rows.append(
            [
                str(r["arguments"]["marglik_batch_size"]),
                f"{r['map_s']:.1f} s",
                f"{r['exact_ggn_s']:.1f} s, {r['exact_over_map']:.2f}x",
                met(r["exact_over_map"], 2.2),
                f"{r['mc_fisher_s']:.1f} s, {r['mc_over_map']:.2f}x",
                met(r["mc_over_map"], 1.5),
            ]
        )
    return speed_section(
        "marglik",
        reports,
        markdown_table(
            [
                "fit batch",
                "MAP",
                "exact GGN",
                "<= 2.2x",
                "Monte-Carlo Fisher",
                "<= 1.5x",
            ],
            rows,
        ),
    )


def kfac_section() -> str:
    """EquivariantKFAC's fit against AsdlGGN's, and F-FC+CONV's block-diagonal decomposition."""
    r = load_json("kfac_speed-cpu.json")
    conv, decomposition = r["conv"], r["f-fc+conv"]["decomposition"]
    return speed_section(
        "kfac",
        [r],
        markdown_table(
            ["measurement", "value", "target", "met"],
            [
                [
                    "CONV: fit, EquivariantKFAC / AsdlGGN",
                    f"{conv['ratio_to_asdl_ggn']:.2f}x",
                    "<= 1.1x",
                    met(conv["ratio_to_asdl_ggn"], 1.1),
                ],
                [
                    "F-FC+CONV: eigenvalues and eigenvectors, dense / block-diagonal",
                    f"{decomposition['speed_up']:.0f}x faster "
                    f"({decomposition['dense']['seconds']:.1f} s / "
                    f"{decomposition['block_diagonal']['seconds']:.2f} s)",
                    ">= 10x",
                    "yes" if decomposition["speed_up"] >= 10 else "**no**",
                ],
                [
                    "F-FC+CONV: factors and eigenvectors, dense / block-diagonal",
                    f"{decomposition['memory_ratio']:.0f}x smaller",
                    ">= 10x",
                    "yes" if decomposition["memory_ratio"] >= 10 else "**no**",
                ],
            ],
        ),
    )


def fit_over_epoch_section() -> str:
    """Each fit against a MAP epoch, with its floor and its parts."""
    r = load_json("fit_over_epoch-cpu.json")
    return speed_section(
        "fit-over-epoch",
        [r],
        markdown_table(
            [
                "model",
                "N",
                "epoch",
                "exact GGN fit",
                "<= 5x",
                "its floor",
                "MC Fisher fit",
                "<= 2x",
                "its floor",
                "eigenvalues (in the fit)",
                "eigenvectors (later)",
            ],
            [
                [
                    row["model"],
                    str(row["n"]),
                    f"{row['epoch_s']:.2f} s",
                    f"{row['exact']['fit_s']:.2f} s, {row['exact']['fit_over_epoch']:.1f}x",
                    met(row["exact"]["fit_over_epoch"], r["targets"]["exact"]),
                    _floor(row["exact"]),
                    f"{row['mc']['fit_s']:.2f} s, {row['mc']['fit_over_epoch']:.1f}x",
                    met(row["mc"]["fit_over_epoch"], r["targets"]["mc"]),
                    _floor(row["mc"]),
                    f"{row['exact']['eigenvalues_s']:.2f} s",
                    f"{row['exact']['eigenvectors_s']:.2f} s",
                ]
                for row in r["rows"]
            ],
        ),
    )


def layers_section() -> str:
    """Forward and backward time and memory of every layer type."""
    r = load_json("layer_speed-cpu.json")
    return speed_section(
        "layers",
        [r],
        markdown_table(
            ["model", "parameters", "fwd+bwd", "ratio to CONV", "peak RSS"],
            [
                [
                    row["model"],
                    f"{row['parameters']:,}",
                    f"{row['median_s']:.3f} s",
                    f"{row['ratio_to_conv']:.2f}",
                    f"{row['peak_rss_mib']:.0f} MiB",
                ]
                for row in r["rows"]
            ],
        ),
    )


def class_passes_section() -> str:
    """The per-class backward passes of the exact GGN's fit."""
    r = load_json("class_backward_passes-cpu.json")
    return speed_section(
        "class-passes",
        [r],
        markdown_table(
            ["graph", "time"],
            [
                [
                    "with the parameters' edges (ASDL)",
                    f"{r['with_parameter_edges_s'] * 1e3:.0f} ms",
                ],
                [
                    "activations only (EquivariantKFAC)",
                    f"{r['activations_only_s'] * 1e3:.0f} ms",
                ],
                [
                    "one pass batched over the classes",
                    f"{r['batched_over_classes_s'] * 1e3:.0f} ms",
                ],
            ],
        ),
    )


def conv_a_factor_section() -> str:
    """CONV's input factor by unfolding against by FFT."""
    r = load_json("conv_a_factor-cpu.json")
    return speed_section(
        "conv-a-factor",
        [r],
        markdown_table(
            ["map", "unfold", "FFT", "speed-up", "relative difference"],
            [
                [
                    "x".join(map(str, m["map"])),
                    f"{m['unfold_ms']:.2f} ms",
                    f"{m['fft_ms']:.2f} ms",
                    f"{m['speed_up']:.1f}x",
                    f"{m['relative_difference']:.1e}",
                ]
                for m in r["maps"]
            ],
        ),
    )


def lengthscale_section() -> str:
    """The lengthscale gradient's accuracy and cost."""
    r = load_json("lengthscale_gradient-cpu.json")
    return speed_section(
        "lengthscale",
        [r],
        markdown_table(
            ["case", "refit central difference", "total (autograd)", "partial"],
            [
                [
                    row["case"],
                    f"{row['refit central difference']:.4f}",
                    f"{row['total (autograd)']:.4f}",
                    f"{row['partial']:.2f}",
                ]
                for row in r["rows"]
            ],
        )
        + "\n\n"
        + markdown_table(
            ["model", "alpha", "examples", "la.fit", "total: value + gradient", "partial"],
            [
                [
                    row["model"],
                    str(row["alpha"]),
                    str(row["examples"]),
                    f"{row['la.fit seconds']:.2f} s",
                    f"{row['total lml + gradient seconds']:.2f} s",
                    f"{row['partial lml + gradient seconds']:.2f} s",
                ]
                for row in r["cost"]
            ],
        ),
    )


def distributed_section() -> str:
    """One process against two, where measured ("" otherwise)."""
    if not (RESULTS / "distributed_speed-cpu.json").exists():
        return ""
    r = load_json("distributed_speed-cpu.json")
    one, two = r["world_size_1"], r["world_size_2"]
    return speed_section(
        "distributed",
        [r],
        markdown_table(
            ["", "one process", "two processes", "speed-up"],
            [
                [
                    "MAP epoch",
                    f"{one['epoch_s']:.2f} s",
                    f"{two['epoch_s']:.2f} s",
                    f"{r['epoch_speed_up']:.2f}x",
                ],
                [
                    "marginal-likelihood step",
                    f"{one['marglik_step_s']:.2f} s",
                    f"{two['marglik_step_s']:.2f} s",
                    f"{r['marglik_step_speed_up']:.2f}x",
                ],
            ],
        ),
    )
