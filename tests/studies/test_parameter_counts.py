"""``studies/parameter_counts.py``: what docs/models.md says of the counts."""

from laplace_equivariance import models
from studies import parameter_counts


def test_rotated_copies_are_the_whole_gap_to_the_reference():
    """Table 3's F-FC+CONV+GCONV: the first layer's F-FC maps (8 x 1 x 1,024 each) and CONV
    filters (8 x 1 x 3 x 3) read one input channel here, four rotated copies in the reference."""
    found = parameter_counts.rotated_copies("table3", "f-fc+conv+gconv")
    assert found["weights"] == 8 * 1 * 1024 * 2 + 8 * 1 * 9
    assert found["extra"] == 3 * found["weights"]
    ours = models.count_parameters(parameter_counts._meta_model("table3", "f-fc+conv+gconv"))
    assert found["gap"] == 1_105_843 - ours
    assert found["extra"] == found["gap"]
    assert parameter_counts.rotated_copies(copies=2)["extra"] == found["weights"]
