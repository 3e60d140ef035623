"""docs/results-table1.md: Table 1, translations on quadrant MNIST (and its Fashion-MNIST twin).

Metadata only: each section names its folder(s) under ``benchmarks/results/``, its command,
the paper's claims checked on its rows (:class:`~benchmarks.generated_docs.claims.Claim`) and
its narrative passages, Markdown fragments under ``fragments/results/`` whose figures are
placeholders rendered from the runs (:mod:`benchmarks.generated_docs.figures`). The renderers
are in :mod:`benchmarks.generated_docs.results_sections` (runs of a folder, the structure they
learned, fit traces), :mod:`~benchmarks.generated_docs.measured_sections` (benchmarks'
measurements on trained runs) and the ``*_section`` modules.
"""

from __future__ import annotations

from dataclasses import replace

from benchmarks.generated_docs.claims import Claim, started, started_equivariant
from benchmarks.generated_docs.common import ROOT
from benchmarks.generated_docs.measured_sections import (
    EvidenceSplitSection,
    ExactBlocksSection,
    FactorBalanceSection,
    ShiftErrorsSection,
)
from benchmarks.generated_docs.results_sections import (
    FitTraceSection,
    Section,
    StructureSection,
    fragment,
    render_page,
)


def table1_claims(item_task: str, pair_task: str, item: str = "digit") -> list[Claim]:
    """Table 1's four claims on its two tasks: ``item_task`` (the class is the ``item``,
    wherever it is) and ``pair_task`` (the class is the item and its quadrant)."""
    return [
        Claim(
            f"translation-invariant {item} task: MAP CONV above MAP FC",
            item_task,
            ("conv", "map"),
            ("fc", "map"),
        ),
        Claim(
            f"({item}, quadrant) task: MAP FC above MAP CONV",
            pair_task,
            ("fc", "map"),
            ("conv", "map"),
        ),
        Claim(
            f"{item} task: learned F-FC+CONV not below MAP CONV",
            item_task,
            ("f-fc+conv", "marglik"),
            ("conv", "map"),
            not_below=True,
        ),
        Claim(
            f"({item}, quadrant) task: learned F-FC+CONV not below MAP FC",
            pair_task,
            ("f-fc+conv", "marglik"),
            ("fc", "map"),
            not_below=True,
        ),
    ]


TABLE1_CLAIMS = table1_claims("quadrant-mnist-digit", "quadrant-mnist")

FASHION_TABLE1_CLAIMS = table1_claims("quadrant-fashion-item", "quadrant-fashion", "item")

HELD_START_CLAIMS = [
    *started(TABLE1_CLAIMS, "held"),
    Claim(
        "(digit, quadrant) task: learned F-FC+CONV (started held) above MAP CONV",
        "quadrant-mnist",
        ("f-fc+conv", "marglik"),
        ("conv", "map"),
        better_start="held",
    ),
    *[
        Claim(
            f"{task}: the held start above the equivariant start",
            dataset,
            ("f-fc+conv", "marglik"),
            ("f-fc+conv", "marglik"),
            better_start="held",
            worse_start="equivariant",
        )
        for task, dataset in (
            ("digit task", "quadrant-mnist-digit"),
            ("(digit, quadrant) task", "quadrant-mnist"),
        )
    ],
]
"""The held start (FC-type paths silenced and held until the first fit) against the
baselines and the equivariant start."""

ABOVE_MAP_F_FC_CONV = [
    Claim(
        f"{task}: learned F-FC+CONV above MAP F-FC+CONV",
        dataset,
        ("f-fc+conv", "marglik"),
        ("f-fc+conv", "map"),
    )
    for task, dataset in (
        ("digit task", "quadrant-mnist-digit"),
        ("(digit, quadrant) task", "quadrant-mnist"),
    )
]
"""What learned priors add to the relaxed architecture, per Table 1 task."""

REDUCE_ABOUT = fragment("reduce-about")

REDUCE_CONCLUSION = fragment("reduce-conclusion")

STRUCTURE_ABOUT = fragment("structure-about")

STRUCTURE_CONCLUSION_60_HELD = fragment("structure-conclusion-60-held")

STRUCTURE_CONCLUSION_60_HELD_TASKS = fragment("structure-conclusion-60-held-tasks")

STRUCTURE_CONCLUSION_150_HELD = fragment("structure-conclusion-150-held")

STRUCTURE_CONCLUSION_HELD_QUADRANT = fragment("structure-conclusion-held-quadrant")

EVIDENCE_SPLIT_CONCLUSION_60_HELD = fragment("evidence-split-conclusion-60-held")

STRUCTURE_CONCLUSION_HELD_H100 = fragment("structure-conclusion-held-h100")

EVIDENCE_SPLIT_ABOUT = fragment("evidence-split-about")

STRUCTURE_CONCLUSION_60_STARTS = fragment("structure-conclusion-60-starts")

EVIDENCE_SPLIT_CONCLUSION_60 = fragment("evidence-split-conclusion-60")

EVIDENCE_SPLIT_CONCLUSION_CONV_LR = fragment("evidence-split-conclusion-conv-lr")

EVIDENCE_SPLIT_CONCLUSION_150 = fragment("evidence-split-conclusion-150")

STRUCTURE_CONCLUSION_20 = fragment("structure-conclusion-20")

STRUCTURE_CONCLUSION_60 = fragment("structure-conclusion-60")

STRUCTURE_CONCLUSION_200 = fragment("structure-conclusion-200")

STRUCTURE_CONCLUSION_150 = fragment("structure-conclusion-150")

STRUCTURE_CONCLUSION_QUADRANT_100 = fragment("structure-conclusion-quadrant-100")

SHIFT_ERRORS_ABOUT = fragment("shift-errors-about")

SHIFT_ERRORS_CONCLUSION_DIGIT = fragment("shift-errors-conclusion-digit")

SHIFT_ERRORS_CONCLUSION_QUADRANT = fragment("shift-errors-conclusion-quadrant")

STRUCTURE_CONCLUSION_QUADRANT_MC = fragment("structure-conclusion-quadrant-mc")

EXACT_TILT_CONCLUSION = fragment("exact-tilt-conclusion")

STRUCTURE_CONCLUSION_BALANCED = fragment("structure-conclusion-balanced")

FACTOR_BALANCE_CONCLUSION = fragment("factor-balance-conclusion")

FIT_TRACE_ABOUT = fragment("fit-trace-about")

STRUCTURE_CONCLUSION_EQUIVARIANT_DIGIT = fragment("structure-conclusion-equivariant-digit")

STRUCTURE_CONCLUSION_EQUIVARIANT_QUADRANT = fragment("structure-conclusion-equivariant-quadrant")

FIT_TRACE_CONCLUSION_MIXED_DIGIT = fragment("fit-trace-conclusion-mixed-digit")

FIT_TRACE_CONCLUSION_EQUIVARIANT_DIGIT = fragment("fit-trace-conclusion-equivariant-digit")

FIT_TRACE_CONCLUSION_EQUIVARIANT_QUADRANT = fragment("fit-trace-conclusion-equivariant-quadrant")

FIT_TRACE_CONCLUSION_HELD_DIGIT = fragment("fit-trace-conclusion-held-digit")

FIT_TRACE_CONCLUSION_HELD_QUADRANT = fragment("fit-trace-conclusion-held-quadrant")

SHIFT_ERRORS_CONCLUSION_HELD_DIGIT = fragment("shift-errors-conclusion-held-digit")

SHIFT_ERRORS_CONCLUSION_HELD_QUADRANT = fragment("shift-errors-conclusion-held-quadrant")

SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_DIGIT = fragment("shift-errors-conclusion-equivariant-digit")

SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_QUADRANT = fragment(
    "shift-errors-conclusion-equivariant-quadrant"
)

DOCUMENT = ROOT / "docs" / "results-table1.md"

TITLE = "Table 1: translations on quadrant MNIST"

SECTIONS = [
    Section(
        "Table 1: quadrant MNIST, 20 epochs, three seeds",
        "table1-20ep",
        "python -m benchmarks.paper_tables table1 --alpha 4 --seeds 0 1 2 --threads 1 "
        "--out benchmarks/results/table1-20ep",
        fragment("table-1-quadrant-mnist-20-epochs-three-seeds-about"),
        TABLE1_CLAIMS[:2] + started(TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV, "held"),
    ),
    Section(
        "Table 1, 20 epochs: the learned F-FC+CONV started equivariant, not held",
        "table1-20ep-equivariant-start",
        "python -m benchmarks.paper_tables table1 --alpha 4 --methods marglik --start equivariant "
        "--seeds 0 1 2 --threads 1 --out DIR (the earlier default; run folders renamed without "
        "the '-equivariant-start' suffix)",
        fragment("table-1-20-epochs-the-learned-f-fc-conv-started-equivariant-about"),
        [
            *started(TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV, "equivariant"),
            *[c for c in HELD_START_CLAIMS if c.worse_start == "equivariant"],
        ],
        beside=("table1-20ep",),
    ),
    StructureSection(
        "What Table 1's learned F-FC+CONV learned, 20 epochs, three seeds",
        ("table1-20ep", "table1-20ep-equivariant-start"),
        "the learned runs of the two sections above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_20,
    ),
    StructureSection(
        "KFAC-expand against KFAC-reduce: Table 1's learned model, 20 epochs, three seeds",
        ("table1-20ep-reduce",),
        "python -m benchmarks.paper_tables table1 --alpha 4 --models f-fc+conv --methods marglik "
        "--seeds 0 1 2 --threads 1 --kfac-approx reduce --out benchmarks/results/table1-20ep-reduce"
        " (expand: the same command without --kfac-approx; both by version 0.1.0, whose learned "
        "runs started mixed and took one prior per path)",
        REDUCE_ABOUT,
        REDUCE_CONCLUSION,
    ),
    Section(
        "Table 1: quadrant MNIST, 60 epochs, three seeds",
        "table1-60ep",
        "python -m benchmarks.paper_tables table1 --dataset D --alpha 4 --epochs 60 --burnin 10 "
        "--marglik-subset 4000 --seeds 0 1 2 --threads 1 "
        "--out benchmarks/results/table1-60ep (D = quadrant-mnist-digit, quadrant-mnist)",
        fragment("table-1-quadrant-mnist-60-epochs-three-seeds-about"),
        TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV,
    ),
    StructureSection(
        "What Table 1's learned F-FC+CONV learned, 60 epochs, three seeds",
        ("table1-60ep",),
        "the learned runs of the 60-epoch table; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-60ep --out docs/figures/table1-60ep-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60,
    ),
    Section(
        "Table 1's digit task, 60 epochs: learned CONV and learned F-FC+CONV started equivariant",
        "table1-digit-4000-60ep-learned",
        "laplace-equivariance train --dataset quadrant-mnist-digit --method marglik --alpha 4 "
        "--epochs 60 --burnin B --marglik-subset 4000 --threads 1 --seed S --out DIR with "
        "--model conv (B = 10), with --model f-fc+conv --start equivariant (B = 10 and 5) and "
        "with --model f-fc+conv --start equivariant --balance-factors (B = 10); S = 0, 1, 2, "
        "three to six runs side by side on the 2-core AMD EPYC",
        fragment("table-1-s-digit-task-60-epochs-learned-conv-and-learned-f-fc-about"),
        [
            *[
                c
                for c in started_equivariant(TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV, burnin=10)
                if c.dataset == "quadrant-mnist-digit"
            ],
            Claim(
                "digit task: learned F-FC+CONV (started equivariant) not below learned CONV",
                "quadrant-mnist-digit",
                ("f-fc+conv", "marglik"),
                ("conv", "marglik"),
                not_below=True,
                better_start="equivariant",
                burnin=10,
            ),
        ],
        beside=("table1-60ep",),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 60 epochs, by start",
        ("table1-60ep", "table1-digit-4000-60ep-learned"),
        "the learned F-FC+CONV runs of the two sections above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60_STARTS,
    ),
    EvidenceSplitSection(
        "The digit task, 60 epochs: where the evidence goes, by start",
        "evidence-split/digit-4000-60ep.json",
        "python -m benchmarks.evidence_split RUN ... --out "
        "benchmarks/results/evidence-split/digit-4000-60ep.json (RUNs: the learned runs of the "
        "two sections above with burn-in 10, and those with the FC paths frozen (below, split "
        "with --threads 2), with their model.pt)",
        EVIDENCE_SPLIT_ABOUT + " " + fragment("evidence-split-about-balanced"),
        EVIDENCE_SPLIT_CONCLUSION_60,
    ),
    Section(
        "Table 1's digit task, 60 epochs: the equivariant start with the FC paths frozen off",
        "table1-digit-4000-60ep-frozen-fc",
        "python -m benchmarks.frozen_paths --dataset quadrant-mnist-digit --model f-fc+conv "
        "--method marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --threads 1 "
        "--seed S --out DIR, S = 0, 1, 2 (three runs side by side on the 2-core AMD EPYC)",
        fragment("table-1-s-digit-task-60-epochs-the-equivariant-start-with-th-about"),
        beside=("table1-digit-4000-60ep-learned",),
    ),
    Section(
        "Table 1's digit task, 60 epochs: the held start",
        "table1-digit-4000-60ep-held",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --start held "
        "--threads 1 --seed S --out DIR, S = 0, 1, 2 (seed 0 alone, seeds 1 and 2 side by side "
        "on the 2-core AMD EPYC); --start held is the default of learned relaxed models",
        fragment("table-1-s-digit-task-60-epochs-the-held-start-about"),
        [
            replace(c, burnin=10)
            for c in HELD_START_CLAIMS
            if c.dataset == "quadrant-mnist-digit" and c.worse != ("fc", "map")
        ],
        beside=(
            "table1-60ep",
            "table1-digit-4000-60ep-learned",
            "table1-digit-4000-60ep-frozen-fc",
        ),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 60 epochs, held start",
        ("table1-digit-4000-60ep-held", "table1-digit-4000-60ep-learned"),
        "the learned F-FC+CONV runs of the sections above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60_HELD,
    ),
    EvidenceSplitSection(
        "The digit task, 60 epochs: where the evidence goes, held start",
        "evidence-split/digit-4000-60ep-held.json",
        "python -m benchmarks.evidence_split RUN ... --threads 1 --out "
        "benchmarks/results/evidence-split/digit-4000-60ep-held.json (RUNs: learned CONV, the "
        "equivariant start and the held start of the sections above, with their model.pt)",
        EVIDENCE_SPLIT_ABOUT,
        EVIDENCE_SPLIT_CONCLUSION_60_HELD,
    ),
    Section(
        "Table 1's digit task, 60 epochs: the held start at Adam's rate times sqrt(2)",
        "table1-digit-4000-60ep-held-lr",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --lr 0.0042426 "
        "--start held --threads 1 --seed S --out DIR, S = 0, 1, 2 (three runs side by side on "
        "the 2-core AMD EPYC)",
        fragment("table-1-s-digit-task-60-epochs-the-held-start-at-adam-s-rate-about"),
        beside=("table1-digit-4000-60ep-held",),
    ),
    Section(
        "Table 1 at 60 epochs, held start: both tasks",
        "table1-quadrant-4000-60ep-held",
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --start held "
        "--threads 1 --seed S --out DIR, S = 0, 1, 2 (three runs side by side on the 2-core AMD "
        "EPYC, 33 minutes each); the digit task's held runs: the section above",
        fragment("table-1-at-60-epochs-held-start-both-tasks-about"),
        [
            *[c for c in HELD_START_CLAIMS if c.worse_start != "equivariant"],
            *started(ABOVE_MAP_F_FC_CONV, "held"),
        ],
        beside=("table1-60ep", "table1-digit-4000-60ep-held"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned at 60 epochs, held start: both tasks",
        ("table1-digit-4000-60ep-held", "table1-quadrant-4000-60ep-held"),
        "the learned runs of the section above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-60ep-held "
        "benchmarks/results/table1-quadrant-4000-60ep-held "
        "--out docs/figures/table1-60ep-held-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60_HELD_TASKS,
    ),
    Section(
        "The held start on one H100: Table 1's two tasks",
        "held-start-h100",
        "LIMIT=520 bash benchmarks/gpu_side_by_side.sh benchmarks/gpu_runs/held-start.txt and "
        "LIMIT=330 bash benchmarks/gpu_side_by_side.sh "
        "benchmarks/gpu_runs/held-start-baselines.txt (benchmarks/results/held-start-h100/"
        "README.md: 24 runs in two calls, up to 15 side by side)",
        fragment("the-held-start-on-one-h100-table-1-s-two-tasks-about"),
        HELD_START_CLAIMS,
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on one H100, held and equivariant starts",
        ("held-start-h100",),
        "the learned F-FC+CONV runs of the section above; figure (held start): python -m "
        "benchmarks.structure_figure benchmarks/results/held-start-h100 --start held --out "
        "docs/figures/held-start-h100-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_HELD_H100,
    ),
    Section(
        "Table 1's digit task, 60 epochs: learned CONV at Adam's rate over sqrt(2)",
        "table1-digit-4000-60ep-conv-lr",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --lr 0.0021213 "
        "--threads 1 --seed S --out DIR, S = 0, 1, 2 (three runs side by side on the 2-core AMD "
        "EPYC)",
        fragment("table-1-s-digit-task-60-epochs-learned-conv-at-adam-s-rate-o-about"),
    ),
    EvidenceSplitSection(
        "The digit task, 60 epochs: where learned CONV's evidence goes at Adam's rate over sqrt(2)",
        "evidence-split/digit-4000-60ep-conv-lr.json",
        "python -m benchmarks.evidence_split RUN0 RUN1 RUN2 --threads 2 --out "
        "benchmarks/results/evidence-split/digit-4000-60ep-conv-lr.json (RUNs: the runs of the "
        "section above, with their model.pt)",
        EVIDENCE_SPLIT_ABOUT,
        EVIDENCE_SPLIT_CONCLUSION_CONV_LR,
    ),
    Section(
        "Table 1's digit task, 1,000 images, 200 epochs, three seeds",
        "table1-digit-1000-200ep",
        "python -m benchmarks.paper_tables table1 --dataset quadrant-mnist-digit --alpha 4 "
        "--subset 1000 --epochs 200 --burnin 10 --marglik-subset 1000 --models conv f-fc+conv "
        "--seeds 0 1 2 --threads 1 --out benchmarks/results/table1-digit-1000-200ep",
        fragment("table-1-s-digit-task-1-000-images-200-epochs-three-seeds-about"),
        [
            TABLE1_CLAIMS[2],
            ABOVE_MAP_F_FC_CONV[0],
        ],
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 1,000 images, 200 epochs",
        ("table1-digit-1000-200ep",),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-1000-200ep --out "
        "docs/figures/table1-digit-1000-200ep-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_200,
    ),
    Section(
        "Table 1's digit task, 4,000 images, 150 epochs, three seeds",
        "table1-digit-4000-150ep",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --threads 1 --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep/quadrant-mnist-digit-f-fc+conv-marglik-seedS "
        "(and --model conv --method map, --model conv --method marglik), S = 0, 1, 2",
        fragment("table-1-s-digit-task-4-000-images-150-epochs-three-seeds-about"),
        [TABLE1_CLAIMS[2]],
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 4,000 images, 150 epochs",
        ("table1-digit-4000-150ep",),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep --out "
        "docs/figures/table1-digit-4000-150ep-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_150,
    ),
    FactorBalanceSection(
        "The digit task's learned F-FC+CONV, 150 epochs: its evidence before and after "
        "balancing the F-FC factors",
        "factor-balance/table1-digit-4000-150ep.json",
        "python -m benchmarks.factor_balance RUN0 RUN1 RUN2 --out "
        "benchmarks/results/factor-balance/table1-digit-4000-150ep.json (RUNs: the learned runs "
        "of the 150-epoch table, with their model.pt)",
        fragment("the-digit-task-s-learned-f-fc-conv-150-epochs-its-evidence-b-about"),
        FACTOR_BALANCE_CONCLUSION,
    ),
    ExactBlocksSection(
        "The digit task's learned F-FC+CONV, 150 epochs: KFAC against the exact GGN for every "
        "path of layers 1-8",
        "exact-blocks/table1-digit-4000-150ep-all-tensors.json",
        'RUNS="..." OUT=... bash benchmarks/gpu_exact_blocks.sh (benchmarks/exact_blocks.py RUN '
        "--device cuda --max-size 32768 --pattern "
        "'^layer[1-8]\\.(fc\\.(input|output)_map|conv)\\.weight$' per run; the three 150-epoch "
        "runs retrained on the CPU with their commands, each reproducing its committed test "
        "accuracy and NLL exactly; the three files' runs merged into "
        "benchmarks/results/exact-blocks/table1-digit-4000-150ep-all-tensors.json; device, "
        "CUDA tests and log in benchmarks/results/exact-blocks/gpu-h200-2026-11-26/)",
        fragment("the-digit-task-s-learned-f-fc-conv-150-epochs-kfac-against-t-about"),
        EXACT_TILT_CONCLUSION,
        runs_folder="table1-digit-4000-150ep",
    ),
    ShiftErrorsSection(
        "The digit task's learned F-FC+CONV, 150 epochs: how equivariant each layer is to the "
        "quadrant shifts",
        "shift-errors/table1-digit-4000-150ep.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --out "
        "benchmarks/results/shift-errors/table1-digit-4000-150ep.json (RUNs: the learned runs "
        "of the 150-epoch table, retrained with their model.pt as for the exact blocks)",
        SHIFT_ERRORS_ABOUT,
        SHIFT_ERRORS_CONCLUSION_DIGIT,
    ),
    StructureSection(
        "The digit task, 4,000 images, 150 epochs, with the F-FC factors balanced at every fit",
        ("table1-digit-4000-150ep", "table1-digit-4000-150ep-balanced"),
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --threads 1 --balance-factors --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep-balanced/"
        "quadrant-mnist-digit-f-fc+conv-marglik-seedS, S = 0, 1, 2 (three runs side by side "
        "on the 2-core AMD EPYC, 45 minutes each); figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep-balanced --out "
        "docs/figures/table1-digit-4000-150ep-balanced-structure.png",
        STRUCTURE_ABOUT + " " + fragment("structure-about-balanced"),
        STRUCTURE_CONCLUSION_BALANCED,
    ),
    Section(
        "Table 1's (digit, quadrant) task, 4,000 images, 100 epochs, three seeds, one GPU",
        "table1-quadrant-4000-100ep-h200",
        "EPOCHS=100 LIMIT=500 OUT=DIR bash benchmarks/gpu_table1_quadrant.sh (on the GPU "
        "machine; it runs laplace-equivariance train --dataset quadrant-mnist --model M "
        "--method X --alpha 4 --epochs 100 --threads 1 --device cuda --seed S for MAP FC, MAP "
        "CONV and learned F-FC+CONV, S = 0, 1, 2, side by side; MAP F-FC+CONV the same way)",
        fragment("table-1-s-digit-quadrant-task-4-000-images-100-epochs-three-about"),
        [
            TABLE1_CLAIMS[1],
            TABLE1_CLAIMS[3],
            ABOVE_MAP_F_FC_CONV[1],
        ],
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs",
        ("table1-quadrant-4000-100ep-h200",),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-quadrant-4000-100ep-h200 --out "
        "docs/figures/table1-quadrant-4000-100ep-h200-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_QUADRANT_100,
    ),
    Section(
        "Table 1 on Fashion-MNIST: 60,000 training items, 6 epochs, three seeds, one GPU",
        "table1-fashion-60k-6ep-h200",
        "LIMIT=310 OUT=DIR bash benchmarks/gpu_side_by_side.sh "
        "benchmarks/gpu_runs/table1-fashion-60k.txt (on the GPU machine, with Fashion-MNIST's "
        "four IDX files in .data/fashion-mnist; it runs laplace-equivariance train --dataset D "
        "--model M --method X --alpha 4 --epochs 6 --data-dir .data/fashion-mnist --device "
        "cuda --threads 1 --seed S, the learned runs with --burnin 2 --marglik-frequency 2 "
        "--marglik-subset 4000 and, on the 40-class task, --stochastic; 18 runs side by side)",
        fragment("table-1-fashion-60k-about"),
        FASHION_TABLE1_CLAIMS[:2] + started(FASHION_TABLE1_CLAIMS, "held"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on Fashion-MNIST, 60,000 items, 6 epochs",
        ("table1-fashion-60k-6ep-h200",),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-fashion-60k-6ep-h200 --out "
        "docs/figures/table1-fashion-60k-6ep-h200-structure.png",
        STRUCTURE_ABOUT,
        fragment("structure-conclusion-fashion-60k"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs, "
        "Monte-Carlo Fisher, CPU",
        ("table1-quadrant-4000-100ep-mc",),
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 100 --stochastic --threads 1 --seed S --out "
        "benchmarks/results/table1-quadrant-4000-100ep-mc/quadrant-mnist-f-fc+conv-marglik-seedS, "
        "S = 0, 1, 2 (three runs side by side on the 2-core AMD EPYC, 19 minutes each)",
        STRUCTURE_ABOUT + " " + fragment("structure-about-quadrant-mc"),
        STRUCTURE_CONCLUSION_QUADRANT_MC,
    ),
    ShiftErrorsSection(
        "The (digit, quadrant) task's learned F-FC+CONV, 100 epochs: how equivariant each layer "
        "is to the quadrant shifts",
        "shift-errors/table1-quadrant-4000-100ep-mc.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --threads 2 --out "
        "benchmarks/results/shift-errors/table1-quadrant-4000-100ep-mc.json (RUNs: the runs of "
        "the section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT + " Here the label names the quadrant, so the predictions must change "
        "under the shifts.",
        SHIFT_ERRORS_CONCLUSION_QUADRANT,
    ),
    FitTraceSection(
        "The digit task started mixed: the FC output share of every layer, fit by fit",
        "table1-digit-4000-150ep",
        "the fits entry of the 150-epoch table's learned F-FC+CONV runs, retrained with the same "
        "command after train began to record it (test and training metrics, losses, marginal "
        "likelihoods and learned precisions equal to the first runs' to the last digit)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_MIXED_DIGIT,
    ),
    Section(
        "Table 1's digit task, 4,000 images, 150 epochs, started equivariant",
        "table1-digit-4000-150ep-equivariant-start",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --threads 1 --start equivariant --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep-equivariant-start/"
        "quadrant-mnist-digit-f-fc+conv-marglik-equivariant-start-seedS, S = 0, 1, 2 (three runs "
        "side by side on the 2-core AMD EPYC, 59 minutes each, three other runs beside them for "
        "part of the time)",
        fragment("table-1-s-digit-task-4-000-images-150-epochs-started-equivar-about"),
        [TABLE1_CLAIMS[2], *started_equivariant([TABLE1_CLAIMS[2]])],
        beside=("table1-digit-4000-150ep",),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 150 epochs, started mixed and "
        "started equivariant",
        ("table1-digit-4000-150ep", "table1-digit-4000-150ep-equivariant-start"),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep-equivariant-start --out "
        "docs/figures/table1-digit-4000-150ep-equivariant-start-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_EQUIVARIANT_DIGIT,
    ),
    FitTraceSection(
        "The digit task started equivariant: the FC output share of every layer, fit by fit",
        "table1-digit-4000-150ep-equivariant-start",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_EQUIVARIANT_DIGIT,
    ),
    ShiftErrorsSection(
        "The digit task started equivariant: how equivariant each layer is to the quadrant shifts",
        "shift-errors/table1-digit-4000-150ep-equivariant-start.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --out "
        "benchmarks/results/shift-errors/table1-digit-4000-150ep-equivariant-start.json (RUNs: "
        "the runs of the section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT,
        SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_DIGIT,
    ),
    Section(
        "Table 1's digit task, 4,000 images, 150 epochs, held start",
        "table1-digit-4000-150ep-held",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --start held --threads 1 --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep-held/"
        "quadrant-mnist-digit-f-fc+conv-marglik-held-start-seedS, S = 0, 1, 2 (three runs side "
        "by side on the 2-core AMD EPYC, 49 minutes each, up to three other jobs beside them)",
        fragment("table-1-s-digit-task-4-000-images-150-epochs-held-start-about"),
        [
            *started([TABLE1_CLAIMS[2]], "held"),
            *started_equivariant([TABLE1_CLAIMS[2]]),
            *[c for c in HELD_START_CLAIMS if c.worse_start == "equivariant"][:1],
        ],
        beside=("table1-digit-4000-150ep", "table1-digit-4000-150ep-equivariant-start"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 150 epochs, by start",
        (
            "table1-digit-4000-150ep",
            "table1-digit-4000-150ep-equivariant-start",
            "table1-digit-4000-150ep-held",
        ),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep-held --out "
        "docs/figures/table1-digit-4000-150ep-held-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_150_HELD,
    ),
    FitTraceSection(
        "The digit task, held start: the FC output share of every layer, fit by fit",
        "table1-digit-4000-150ep-held",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_HELD_DIGIT,
    ),
    ShiftErrorsSection(
        "The digit task, held start: how equivariant each layer is to the quadrant shifts",
        "shift-errors/table1-digit-4000-150ep-held.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --threads 1 --out "
        "benchmarks/results/shift-errors/table1-digit-4000-150ep-held.json (RUNs: the runs of "
        "the held 150-epoch section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT,
        SHIFT_ERRORS_CONCLUSION_HELD_DIGIT,
    ),
    EvidenceSplitSection(
        "The digit task, 150 epochs: where the evidence goes, learned CONV against learned "
        "F-FC+CONV",
        "evidence-split/digit-4000-150ep.json",
        "python -m benchmarks.evidence_split RUN ... --out "
        "benchmarks/results/evidence-split/digit-4000-150ep.json (RUNs: the learned runs of the "
        "150-epoch table and of the equivariant start's, with their model.pt)",
        EVIDENCE_SPLIT_ABOUT,
        EVIDENCE_SPLIT_CONCLUSION_150,
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs, "
        "Monte-Carlo Fisher, started mixed and started equivariant",
        ("table1-quadrant-4000-100ep-mc", "table1-quadrant-4000-100ep-mc-equivariant-start"),
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 100 --stochastic --threads 1 --start equivariant --seed S "
        "--out benchmarks/results/table1-quadrant-4000-100ep-mc-equivariant-start/"
        "quadrant-mnist-f-fc+conv-marglik-equivariant-start-seedS, S = 0, 1, 2 (three runs side "
        "by side on the 2-core AMD EPYC with three digit-task runs, 30 minutes each); the first "
        "row: the Monte-Carlo Fisher section's runs above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_EQUIVARIANT_QUADRANT,
    ),
    Section(
        "The (digit, quadrant) task, 100 epochs, Monte-Carlo Fisher, held start",
        "table1-quadrant-4000-100ep-mc-held",
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 100 --stochastic --start held --threads 1 --seed S --out "
        "benchmarks/results/table1-quadrant-4000-100ep-mc-held/"
        "quadrant-mnist-f-fc+conv-marglik-held-start-seedS, S = 0, 1, 2 (three runs side by "
        "side on the 2-core AMD EPYC, 13 minutes each)",
        fragment("the-digit-quadrant-task-100-epochs-monte-carlo-fisher-held-s-about"),
        [c for c in HELD_START_CLAIMS if c.worse_start == "equivariant"][1:],
        beside=("table1-quadrant-4000-100ep-mc", "table1-quadrant-4000-100ep-mc-equivariant-start"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs, "
        "Monte-Carlo Fisher, by start",
        (
            "table1-quadrant-4000-100ep-mc",
            "table1-quadrant-4000-100ep-mc-equivariant-start",
            "table1-quadrant-4000-100ep-mc-held",
        ),
        "the learned runs of the section above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_HELD_QUADRANT,
    ),
    FitTraceSection(
        "The (digit, quadrant) task, held start: the FC output share of every layer, fit by fit",
        "table1-quadrant-4000-100ep-mc-held",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_HELD_QUADRANT,
        epochs=(10, 15, 20, 30, 40, 60, 80, 100),
    ),
    ShiftErrorsSection(
        "The (digit, quadrant) task, held start: how equivariant each layer is to the quadrant "
        "shifts",
        "shift-errors/table1-quadrant-4000-100ep-mc-held.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --threads 1 --out "
        "benchmarks/results/shift-errors/table1-quadrant-4000-100ep-mc-held.json (RUNs: the "
        "runs of the held Monte-Carlo section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT + " Here the label names the quadrant, so the predictions must change "
        "under the shifts.",
        SHIFT_ERRORS_CONCLUSION_HELD_QUADRANT,
    ),
    FitTraceSection(
        "The (digit, quadrant) task started equivariant: the FC output share of every layer, "
        "fit by fit",
        "table1-quadrant-4000-100ep-mc-equivariant-start",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_EQUIVARIANT_QUADRANT,
        epochs=(10, 15, 20, 30, 40, 60, 80, 100),
    ),
    ShiftErrorsSection(
        "The (digit, quadrant) task started equivariant: how equivariant each layer is to the "
        "quadrant shifts",
        "shift-errors/table1-quadrant-4000-100ep-mc-equivariant-start.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --out "
        "benchmarks/results/shift-errors/table1-quadrant-4000-100ep-mc-equivariant-start.json "
        "(RUNs: the runs of the structure section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT + " Here the label names the quadrant, so the predictions must change "
        "under the shifts.",
        SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_QUADRANT,
    ),
]


def render() -> str:
    """The whole of docs/results-table1.md."""
    return render_page(TITLE, SECTIONS)
