"""The invariant-weights section's claims over seeds."""

from studies import invariant_weights_section


def test_invariant_weights_claims_compare_learned_angles_over_seeds():

    def learned(dataset, objective, degrees):
        return {
            (dataset, objective, None): [
                {"eta_degrees": d, "dataset": dataset, "objective": objective} for d in degrees
            ]
        }

    experiments = (
        learned("rotated-mnist", "elbo", [150.0, 160.0, -170.0])  # the sign of eta is free
        | learned("partially-rotated-mnist", "elbo", [60.0, 70.0, 80.0])
        | learned("mnist", "elbo", [60.0, 75.0, 90.0])
        | learned("mnist", "likelihood", [1.0, 2.0, 3.0])
        | learned("rotated-mnist", "laplace", [100.0])
        | learned("partially-rotated-mnist", "laplace", [50.0])
        | learned("mnist", "laplace", [5.0])
    )
    claims = invariant_weights_section.InvariantWeightsSection.claims(experiments)
    assert claims[0].endswith("reproduced (difference +90.0 degrees, standard error 8.2)")
    assert "not distinguishable" in claims[1]
    assert all(line.endswith("one seed: no verdict") for line in claims[2:4])
    assert claims[-3].endswith("not run")  # no likelihood-only run on rotated digits
    assert "reproduced" in claims[-1]
