"""docs/speed.md: the timing benchmarks' JSON files as tables, with their issues' targets.

Each section's title and what it measured are the Markdown fragment ``fragments/speed/NAME.md``
(its figures placeholders of :mod:`benchmarks.generated_docs.figures`); the tables are computed
here. Each JSON names its command, device and thread count.
"""

from __future__ import annotations

from benchmarks.generated_docs import figures
from benchmarks.generated_docs.common import ROOT
from benchmarks.generated_docs.speed_common import FRAGMENTS
from benchmarks.generated_docs.speed_cpu_sections import (
    before_after_section,
    class_passes_section,
    conv_a_factor_section,
    distributed_section,
    fit_over_epoch_section,
    kfac_section,
    layers_section,
    lengthscale_section,
    marglik_section,
    predictive_section,
)
from benchmarks.generated_docs.speed_training_sections import (
    compiled_section,
    gpu_section,
    scale_section,
    stock_cnn_section,
)

DOCUMENT = ROOT / "docs" / "speed.md"

SECTIONS = (
    stock_cnn_section,
    gpu_section,
    compiled_section,
    scale_section,
    marglik_section,
    kfac_section,
    fit_over_epoch_section,
    before_after_section,
    layers_section,
    predictive_section,
    class_passes_section,
    conv_a_factor_section,
    lengthscale_section,
    distributed_section,
)
"""The page's sections in order; one with nothing measured yet renders as "" and is left out."""


def render() -> str:
    """The whole of docs/speed.md."""
    sections = [text for text in (section() for section in SECTIONS) if text]
    header = figures.render_fragment(FRAGMENTS / "header.md")
    return header + "\n" + "\n\n".join(sections) + "\n"
