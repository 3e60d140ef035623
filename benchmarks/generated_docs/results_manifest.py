"""docs/results.md's sections: which runs, the command that made them, the claims judged.

Metadata only: each section names its folder(s) under ``benchmarks/results/``, its command,
the paper's claims checked on its rows (:class:`~benchmarks.generated_docs.results_sections.
Claim`) and its narrative passages, Markdown fragments under ``fragments/results/`` whose
figures are placeholders rendered from the runs (:mod:`benchmarks.generated_docs.figures`).
The renderers are in :mod:`benchmarks.generated_docs.results_sections`.
"""

from __future__ import annotations

from dataclasses import replace

from benchmarks.generated_docs.group_evidence_section import (
    FULL_GCONV_NETWORK,
    GroupEvidenceSection,
)
from benchmarks.generated_docs.results_sections import (
    Claim,
    EvidenceSplitSection,
    ExactBlocksSection,
    FactorBalanceSection,
    FitTraceSection,
    InvariantWeightsSection,
    Section,
    ShiftErrorsSection,
    StructureSection,
    fragment,
    started,
    started_equivariant,
)
from benchmarks.generated_docs.rotation_section import RotationSplitSection

TABLE2_F_FC_CONV_CLAIMS = [
    Claim(
        "learned F-FC+CONV (held start) not below MAP CONV (the paper: within 1%)",
        "fashion-mnist",
        ("f-fc+conv", "marglik"),
        ("conv", "map"),
        not_below=True,
        better_start="held",
    ),
    Claim(
        "learned F-FC+CONV (held start) above MAP F-FC+CONV",
        "fashion-mnist",
        ("f-fc+conv", "marglik"),
        ("f-fc+conv", "map"),
        better_start="held",
    ),
]
"""Table 2's claims on its learned F-FC+CONV (held start), judged at every budget."""

TABLE2_HELD_NOT_BELOW_ITS_MAP = replace(
    TABLE2_F_FC_CONV_CLAIMS[1],
    text="learned F-FC+CONV (held start) not below MAP F-FC+CONV",
    not_below=True,
)
"""Issue 44's target for Table 2's learned row: at or above its own MAP."""


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

STRUCTURE_CONCLUSION_TABLE3 = fragment("structure-conclusion-table3")

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
    Section(
        "Table 2 on Fashion-MNIST, 20 epochs, three seeds",
        "table2-fashion-20ep",
        "python -m benchmarks.paper_tables table2 --alpha 4 --subset 4000 --test-subset 1000 "
        "--seeds 0 1 2 --threads 1 --out benchmarks/results/table2-fashion-20ep",
        fragment("table-2-on-fashion-mnist-20-epochs-three-seeds-about"),
        [
            Claim(
                "MAP CONV above MAP FC",
                "fashion-mnist",
                ("conv", "map"),
                ("fc", "map"),
            ),
            Claim(
                "learned FC above MAP FC",
                "fashion-mnist",
                ("fc", "marglik"),
                ("fc", "map"),
            ),
            Claim(
                "learned FC+CONV above MAP FC+CONV",
                "fashion-mnist",
                ("fc+conv", "marglik"),
                ("fc+conv", "map"),
            ),
            *TABLE2_F_FC_CONV_CLAIMS,
            Claim(
                "learned F-FC above MAP F-FC",
                "fashion-mnist",
                ("f-fc", "marglik"),
                ("f-fc", "map"),
            ),
            Claim(
                "learned S-FC+S-CONV (held start) not below MAP S-FC+S-CONV",
                "fashion-mnist",
                ("s-fc+s-conv", "marglik"),
                ("s-fc+s-conv", "map"),
                not_below=True,
                better_start="held",
            ),
        ],
    ),
    Section(
        "Table 2's F-FC+CONV on Fashion-MNIST, 100 epochs, three seeds",
        "table2-fashion-100ep",
        "python -m benchmarks.paper_tables table2 --alpha 4 --subset 4000 --test-subset 1000 "
        "--epochs 100 --burnin 10 --models f-fc+conv --methods marglik map --seeds 0 1 2 "
        "--threads 1 --data-dir .data/fashion-mnist --out benchmarks/results/table2-fashion-100ep; "
        "MAP CONV: the same with --models conv --methods map",
        fragment("table-2-fashion-100ep-about"),
        [
            *TABLE2_F_FC_CONV_CLAIMS,
            TABLE2_HELD_NOT_BELOW_ITS_MAP,
        ],
    ),
    Section(
        "Table 2's learned F-FC+CONV at temperature 2, 100 epochs, three seeds",
        "table2-fashion-100ep-temperature2",
        "python -m benchmarks.paper_tables table2 --alpha 4 --subset 4000 --test-subset 1000 "
        "--epochs 100 --burnin 10 --models f-fc+conv --methods marglik --temperature 2 "
        "--seeds 0 1 2 --threads 1 --data-dir .data/fashion-mnist "
        "--out benchmarks/results/table2-fashion-100ep-temperature2",
        fragment("table-2-fashion-100ep-temperature2-about"),
        [
            replace(
                claim,
                text=claim.text.replace("(held start)", "(held start, temperature 2)"),
                better_variants=("temperature 2",),
            )
            for claim in TABLE2_F_FC_CONV_CLAIMS
        ],
        beside=("table2-fashion-100ep",),
    ),
    Section(
        "Table 2's learned F-FC+CONV with the evidence of all 4,000 images, 100 epochs, three "
        "seeds",
        "table2-fashion-100ep-marglik4000",
        "python -m benchmarks.paper_tables table2 --alpha 4 --subset 4000 --test-subset 1000 "
        "--epochs 100 --burnin 10 --models f-fc+conv --methods marglik --marglik-subset 4000 "
        "--seeds 0 1 2 --threads 1 --data-dir .data/fashion-mnist "
        "--out benchmarks/results/table2-fashion-100ep-marglik4000",
        fragment("table-2-fashion-100ep-marglik4000-about"),
        beside=("table2-fashion-100ep",),
    ),
    Section(
        "Table 2's learned F-FC+CONV started mixed, 100 epochs, three seeds, one machine",
        "table2-fashion-100ep-mixed",
        "python -m benchmarks.paper_tables table2 --alpha 4 --subset 4000 --test-subset 1000 "
        "--epochs 100 --burnin 10 --models f-fc+conv --methods marglik map --seeds 0 1 2 "
        "--threads 1 --data-dir .data/fashion-mnist --out benchmarks/results/"
        "table2-fashion-100ep-mixed; the mixed start: the same with --methods marglik "
        "--start mixed",
        fragment("table-2-fashion-100ep-mixed-about"),
        [
            TABLE2_F_FC_CONV_CLAIMS[1],
            TABLE2_HELD_NOT_BELOW_ITS_MAP,
            Claim(
                "learned F-FC+CONV (mixed start) above MAP F-FC+CONV",
                "fashion-mnist",
                ("f-fc+conv", "marglik"),
                ("f-fc+conv", "map"),
            ),
            Claim(
                "learned F-FC+CONV (mixed start) above learned F-FC+CONV (held start)",
                "fashion-mnist",
                ("f-fc+conv", "marglik"),
                ("f-fc+conv", "marglik"),
                worse_start="held",
            ),
        ],
    ),
    Section(
        "Table 2's F-FC+CONV on 16,000 Fashion-MNIST items, 3,200 steps, three seeds",
        "table2-fashion-16000",
        "laplace-equivariance train --dataset fashion-mnist --model f-fc+conv --method M "
        "--alpha 4 --epochs 25 --burnin 3 --marglik-frequency 1 --subset 16000 "
        "--test-subset 1000 --seed S --threads 1 --data-dir .data/fashion-mnist "
        "--out benchmarks/results/table2-fashion-16000/fashion-mnist-f-fc+conv-M-seedS "
        "(M = map, marglik, the learned runs also --marglik-subset 1000; MAP CONV: --model conv "
        "--method map, its folder fashion-mnist-conv-map-seedS; S = 0, 1, 2); the learned run "
        "with the same schedule on 4,000 items: --method marglik --subset 4000 --epochs 100 "
        "--burnin 12 --marglik-frequency 4 --marglik-subset 1000 --out benchmarks/results/"
        "table2-fashion-4000-16000-schedule/fashion-mnist-f-fc+conv-marglik-seedS",
        fragment("table-2-fashion-16000-about"),
        [
            replace(claim, burnin=3)
            for claim in [*TABLE2_F_FC_CONV_CLAIMS, TABLE2_HELD_NOT_BELOW_ITS_MAP]
        ],
        beside=("table2-fashion-4000-16000-schedule",),
    ),
    Section(
        "Table 2's F-FC+CONV on 8,000 Fashion-MNIST items, 3,150 steps, three seeds",
        "table2-fashion-8000",
        "laplace-equivariance train --dataset fashion-mnist --model f-fc+conv --method M "
        "--alpha 4 --epochs 50 --burnin 6 --marglik-frequency 2 --subset 8000 "
        "--test-subset 1000 --seed S --threads 1 --data-dir .data/fashion-mnist "
        "--out benchmarks/results/table2-fashion-8000/fashion-mnist-f-fc+conv-M-seedS "
        "(M = map, marglik, the learned runs also --marglik-subset 1000; S = 0, 1, 2)",
        fragment("table-2-fashion-8000-about"),
        [TABLE2_F_FC_CONV_CLAIMS[1], TABLE2_HELD_NOT_BELOW_ITS_MAP],
    ),
    Section(
        "Table 3: MNIST, translated and rotated MNIST, 20 epochs, three seeds",
        "table3-mnist-20ep",
        "python -m benchmarks.paper_tables table3 --dataset D --seeds 0 1 2 --threads 1 "
        "--out benchmarks/results/table3-mnist-20ep (D = mnist, translated-mnist, rotated-mnist)",
        fragment("table-3-mnist-translated-and-rotated-mnist-20-epochs-three-s-about"),
        [
            Claim(
                f"{dataset}: learned F-FC+CONV+GCONV (held start) not below MAP of the same "
                "network",
                dataset,
                ("f-fc+conv+gconv", "marglik"),
                ("f-fc+conv+gconv", "map"),
                not_below=True,
                better_start="held",
            )
            for dataset in ("mnist", "translated-mnist", "rotated-mnist")
        ],
    ),
    StructureSection(
        "What Table 3's learned F-FC+CONV+GCONV learned, 20 epochs, three seeds",
        ("table3-mnist-20ep",),
        "the learned runs of the table above; figure (every path): python -m "
        "benchmarks.structure_figure benchmarks/results/table3-mnist-20ep --out "
        "docs/figures/table3-20ep-structure.png",
        STRUCTURE_ABOUT.replace("the CONV path has the rest", "CONV and GCONV have the rest"),
        STRUCTURE_CONCLUSION_TABLE3,
    ),
    RotationSplitSection(
        "Table 3 at 60 epochs: GCONV on rotated against upright digits, layer by layer",
        "table3-mnist-60ep-held",
        "python -m benchmarks.paper_tables table3 --dataset D --models f-fc+conv+gconv --methods "
        "marglik --alpha 2 --epochs 60 --burnin 6 --marglik-subset 1000 --start held --seeds 0 1 2 "
        "--threads 1 --out benchmarks/results/table3-mnist-60ep-held (D = mnist, rotated-mnist, "
        "translated-mnist, partially-rotated-mnist, quarter-turn-mnist)",
        fragment("table3-rotation-split-60-about"),
        fragment("table3-rotation-split-60-conclusion"),
    ),
    RotationSplitSection(
        "Table 3 at 60 epochs, started as the GCONV network: GCONV on rotated against upright "
        "digits",
        "table3-mnist-60ep-held-gconv",
        "python -m benchmarks.paper_tables table3 --dataset D --models f-fc+conv+gconv --methods "
        "marglik --alpha 2 --epochs 60 --burnin 6 --marglik-subset 1000 --start held-gconv "
        "--seeds 0 1 2 --threads 1 --out benchmarks/results/table3-mnist-60ep-held-gconv "
        "(D = mnist, rotated-mnist, quarter-turn-mnist, translated-mnist, partially-rotated-mnist)",
        fragment("table3-rotation-split-60-held-gconv-about"),
        fragment("table3-rotation-split-60-held-gconv-conclusion"),
    ),
    GroupEvidenceSection(
        "Table 3 at 60 epochs: the GCONV network against the CONV network by their evidence",
        "table3-mnist-60ep-frozen",
        "python -m benchmarks.frozen_paths --frozen fc P --dataset D --model f-fc+conv+gconv "
        "--method marglik --alpha 2 --epochs 60 --burnin 6 --marglik-subset 1000 --threads 1 "
        "--seed S --out benchmarks/results/table3-mnist-60ep-frozen/D-f-fc+conv+gconv-marglik-"
        "N-network-seedS (P = conv for the GCONV network N = gconv, gconv for the CONV network "
        "N = conv; D = mnist, translated-mnist, partially-rotated-mnist, rotated-mnist, "
        "quarter-turn-mnist; S = 0, 1, 2)",
        fragment("table3-group-evidence-60-about"),
        beside=("table3-mnist-60ep-held", "table3-mnist-60ep-held-gconv"),
        conclusion=fragment("table3-group-evidence-60-conclusion"),
    ),
    GroupEvidenceSection(
        "Table 3 at 60 epochs: a GCONV network with the CONV network's weights",
        "table3-mnist-60ep-gconv-wide",
        "laplace-equivariance train --dataset D --model gconv --method marglik --alpha 8 "
        "--epochs 60 --burnin 6 --marglik-subset 1000 --threads 1 --seed S --out "
        "benchmarks/results/table3-mnist-60ep-gconv-wide/D-gconv-alpha8-marglik-seedS "
        "(D = mnist, rotated-mnist; S = 0, 1, 2)",
        fragment("table3-gconv-wide-60-about"),
        beside=("table3-mnist-60ep-frozen",),
        conclusion=fragment("table3-gconv-wide-60-conclusion"),
        gconv="GCONV network, alpha 8",
    ),
    RotationSplitSection(
        "Table 3 at 60 epochs with full group convolutions: GCONV on rotated against upright "
        "digits",
        "table3-mnist-60ep-gconv-full",
        "laplace-equivariance train --dataset D --model f-fc+conv+gconv-full --method marglik "
        "--alpha 2 --epochs 60 --burnin 6 --marglik-subset 1000 --start held --threads 1 --seed S "
        "--out benchmarks/results/table3-mnist-60ep-gconv-full/D-f-fc+conv+gconv-full-marglik-"
        "held-start-seedS (D = mnist, rotated-mnist, quarter-turn-mnist, translated-mnist; "
        "S = 0, 1, 2)",
        fragment("table3-gconv-full-60-about"),
        fragment("table3-gconv-full-60-conclusion"),
        model="f-fc+conv+gconv-full",
    ),
    RotationSplitSection(
        "Table 3 at 60 epochs with full group convolutions, started as the GCONV-full network",
        "table3-mnist-60ep-gconv-full-held-gconv",
        "laplace-equivariance train --dataset D --model f-fc+conv+gconv-full --method marglik "
        "--alpha 2 --epochs 60 --burnin 6 --marglik-subset 1000 --start held-gconv --threads 1 "
        "--seed S --out benchmarks/results/table3-mnist-60ep-gconv-full-held-gconv/D-f-fc+conv+"
        "gconv-full-marglik-held-gconv-start-seedS (D = mnist, rotated-mnist, quarter-turn-mnist; "
        "S = 0, 1, 2)",
        fragment("table3-gconv-full-held-gconv-60-about"),
        fragment("table3-gconv-full-held-gconv-60-conclusion"),
        model="f-fc+conv+gconv-full",
    ),
    Section(
        "Table 3 at 60 epochs: pointwise against full group convolutions, one machine",
        "table3-mnist-60ep-pointwise",
        "laplace-equivariance train --dataset D --model f-fc+conv+gconv --method marglik --alpha 2 "
        "--epochs 60 --burnin 6 --marglik-subset 1000 --start held --threads 1 --seed S --out "
        "benchmarks/results/table3-mnist-60ep-pointwise/D-f-fc+conv+gconv-marglik-held-start-seedS "
        "(D = mnist, rotated-mnist, quarter-turn-mnist; S = 0, 1, 2)",
        fragment("table3-pointwise-against-full-60-about"),
        [
            Claim(
                f"{dataset}: learned F-FC+CONV+GCONV-full (held start) "
                f"{'not below' if dataset == 'mnist' else 'above'} learned F-FC+CONV+GCONV "
                "(held start)",
                dataset,
                ("f-fc+conv+gconv-full", "marglik"),
                ("f-fc+conv+gconv", "marglik"),
                not_below=dataset == "mnist",
                better_start="held",
                worse_start="held",
            )
            for dataset in ("mnist", "rotated-mnist", "quarter-turn-mnist")
        ],
        beside=("table3-mnist-60ep-gconv-full",),
        claims_heading="Full against pointwise group convolutions, by test accuracy:",
    ),
    GroupEvidenceSection(
        "Table 3 at 60 epochs: the GCONV-full network against the CONV network by their evidence",
        "table3-mnist-60ep-gconv-full-frozen",
        "python -m benchmarks.frozen_paths --frozen fc conv --dataset D --model "
        "f-fc+conv+gconv-full --method marglik --alpha 2 --epochs 60 --burnin 6 --marglik-subset "
        "1000 --threads 1 --seed S --out benchmarks/results/table3-mnist-60ep-gconv-full-frozen/"
        "D-f-fc+conv+gconv-full-marglik-gconv-full-network-seedS (D = mnist, rotated-mnist; "
        "S = 0, 1, 2)",
        fragment("table3-gconv-full-evidence-60-about"),
        beside=(
            "table3-mnist-60ep-frozen",
            "table3-mnist-60ep-pointwise",
            "table3-mnist-60ep-gconv-full",
            "table3-mnist-60ep-gconv-full-held-gconv",
        ),
        conclusion=fragment("table3-gconv-full-evidence-60-conclusion"),
        gconv=FULL_GCONV_NETWORK,
    ),
    RotationSplitSection(
        "Table 3 at 120 epochs with full group convolutions: rotated against upright digits, "
        "and the GCONV-full network's evidence",
        "table3-mnist-120ep-gconv-full",
        "laplace-equivariance train --dataset D --model f-fc+conv+gconv-full --method marglik "
        "--alpha 2 --epochs 120 --burnin 6 --marglik-subset 1000 --start held --threads 1 --seed S "
        "--out benchmarks/results/table3-mnist-120ep-gconv-full/D-f-fc+conv+gconv-full-marglik-"
        "held-start-seedS (D = rotated-mnist, mnist; S = 0, 1, 2)",
        fragment("table3-gconv-full-120-about"),
        fragment("table3-gconv-full-120-conclusion"),
        model="f-fc+conv+gconv-full",
    ),
    *[
        FitTraceSection(
            "Table 3 at 120 epochs with full group convolutions: GCONV's output share fit by "
            f"fit, {digits} digits",
            "table3-mnist-120ep-gconv-full",
            "the fits entry of the runs' results.json (written by train)",
            fragment("table3-gconv-full-120-trace-about"),
            fragment(f"table3-gconv-full-120-trace-{digits}-conclusion"),
            epochs=tuple(range(10, 121, 10)),
            path="gconv",
            dataset=dataset,
        )
        for digits, dataset in (("rotated", "rotated-mnist"), ("upright", "mnist"))
    ],
    InvariantWeightsSection(
        "Invariant weights: the rotation learned on real digits, three seeds",
        "invariant-weights",
        "python -m benchmarks.invariant_weights_rotation --seed S "
        "--out benchmarks/results/invariant-weights (S = 0, 1, 2)",
        fragment("invariant-weights-the-rotation-learned-on-real-digits-three-about"),
    ),
]
