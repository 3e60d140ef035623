"""docs/results-table3.md: Table 3, rotations (the sections' metadata, as for Table 1)."""

from __future__ import annotations

from benchmarks.generated_docs.claims import Claim
from benchmarks.generated_docs.common import ROOT
from benchmarks.generated_docs.group_evidence_section import (
    FULL_GCONV_NETWORK,
    GroupEvidenceSection,
)
from benchmarks.generated_docs.invariant_weights_section import InvariantWeightsSection
from benchmarks.generated_docs.results_sections import (
    FitTraceSection,
    Section,
    StructureSection,
    fragment,
    render_page,
)
from benchmarks.generated_docs.rotation_section import RotationSplitSection

STRUCTURE_CONCLUSION_TABLE3 = fragment("structure-conclusion-table3")

MAP_DIGITS = (
    "mnist",
    "translated-mnist",
    "rotated-mnist",
    "partially-rotated-mnist",
    "quarter-turn-mnist",
)
"""The digit sets MAP F-FC+CONV+GCONV-full ran on at 60 epochs (the paper's three, partially
rotated digits, and quarter-turned digits, the known truth for GCONV)."""

DOCUMENT = ROOT / "docs" / "results-table3.md"

TITLE = "Table 3: rotations"

SECTIONS = [
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
        fragment("structure-about").replace(
            "the CONV path has the rest", "CONV and GCONV have the rest"
        ),
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
        "held-start-seedS (D = mnist, rotated-mnist, quarter-turn-mnist, translated-mnist, "
        "partially-rotated-mnist; S = 0, 1, 2)",
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
        "gconv-full-marglik-held-gconv-start-seedS (D = mnist, rotated-mnist, quarter-turn-mnist, "
        "translated-mnist, partially-rotated-mnist; S = 0, 1, 2)",
        fragment("table3-gconv-full-held-gconv-60-about"),
        fragment("table3-gconv-full-held-gconv-60-conclusion"),
        model="f-fc+conv+gconv-full",
    ),
    RotationSplitSection(
        "Table 3 at 60 epochs with full group convolutions: the start of higher evidence",
        "table3-mnist-60ep-gconv-full",
        "the runs of the two sections above, each data set and seed kept from the start of the "
        "lower last -log p(D)/N",
        fragment("table3-gconv-full-chosen-60-about"),
        fragment("table3-gconv-full-chosen-60-conclusion"),
        model="f-fc+conv+gconv-full",
        rivals=("table3-mnist-60ep-gconv-full-held-gconv",),
    ),
    Section(
        "Table 3 at 60 epochs with full group convolutions: learned against MAP",
        "table3-mnist-60ep-gconv-full-map",
        "laplace-equivariance train --dataset D --model f-fc+conv+gconv-full --method map "
        "--alpha 2 --epochs 60 --threads 1 --seed S --out benchmarks/results/table3-mnist-60ep-"
        "gconv-full-map/D-f-fc+conv+gconv-full-map-seedS (D = mnist, translated-mnist, "
        "rotated-mnist, partially-rotated-mnist, quarter-turn-mnist; S = 0, 1, 2); the learned "
        "rows are the runs of the sections above",
        fragment("table3-gconv-full-map-60-about"),
        [
            Claim(
                f"{dataset}: learned F-FC+CONV+GCONV-full ({start} start) above MAP of the same "
                "network",
                dataset,
                ("f-fc+conv+gconv-full", "marglik"),
                ("f-fc+conv+gconv-full", "map"),
                better_start=start,
            )
            for dataset in MAP_DIGITS
            for start in ("held", "held-gconv")
        ],
        beside=("table3-mnist-60ep-gconv-full", "table3-mnist-60ep-gconv-full-held-gconv"),
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


def render() -> str:
    """The whole of docs/results-table3.md."""
    return render_page(TITLE, SECTIONS)
