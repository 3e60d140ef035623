"""The run configuration: one declaration of every train option, checked when made."""

import dataclasses
import json

import pytest

from laplace_equivariance import cli, run_config
from laplace_equivariance.experiment import train
from laplace_equivariance.run_config import DEFAULTS, Method, RunConfig, Start


def test_every_field_is_a_train_option_with_its_default_and_nothing_else():
    parser = cli._parser()
    train_parser = parser._subparsers._group_actions[0].choices["train"]
    options = {a.dest for a in train_parser._actions} - {"help", "config", "out", "overwrite"}
    assert options == {f.name for f in dataclasses.fields(RunConfig)} == set(DEFAULTS)
    args = parser.parse_args(["train", "--out", "x"])
    assert all(getattr(args, name) is None for name in DEFAULTS)  # None: not given
    assert "[0.003]" in train_parser.format_help() and "[layerwise]" in train_parser.format_help()


def test_strings_become_enum_members_and_the_dict_form_holds_plain_values():
    config = RunConfig(method="map", start="held", optimizer="sgd")
    assert config.method is Method.MAP and config.start is Start.HELD
    settings = config.settings()
    assert settings["method"] == "map" and type(settings["method"]) is str
    assert json.loads(json.dumps(settings)) == settings
    assert RunConfig.from_settings(settings) == config


def test_a_value_outside_its_choices_or_an_unknown_key_is_refused_by_name():
    with pytest.raises(ValueError, match=r"method='mapp' is not one of \['map', 'marglik'"):
        RunConfig(method="mapp")
    with pytest.raises(ValueError, match=r"\['epochz'\] is not a setting"):
        RunConfig.from_settings({"epochz": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunConfig().epochs = 3


def test_train_takes_a_run_config_and_records_its_dict_form(tmp_path):
    config = RunConfig(
        dataset="quadrant-mnist",
        model="conv",
        method=Method.MAP,
        alpha=1,
        epochs=1,
        subset=64,
        test_subset=32,
        threads=1,
        device="cpu",
    )
    results = train(config, tmp_path / "run")
    assert results["settings"]["method"] == "map" and results["settings"]["start"] == "mixed"
    assert (
        json.loads((tmp_path / "run" / "results.json").read_text())["settings"]["model"] == "conv"
    )


def test_train_refuses_a_dict_with_a_key_that_is_no_setting(tmp_path):
    with pytest.raises(SystemExit, match=r"\['epoch'\] is not a setting"):
        train(
            dict(
                DEFAULTS,
                epoch=3,
                model="conv",
                method="map",
                alpha=1,
                epochs=1,
                subset=64,
                test_subset=32,
                threads=1,
                device="cpu",
            ),
            tmp_path / "run",
        )  # tiny, so that without the check the test fails fast instead of training long


def test_the_enums_offer_what_the_training_code_accepts():
    """Optimizer and KfacApprox are made from the tuples that marglik_training checks."""
    from laplace_equivariance.curvature.rules import KFAC_APPROXIMATIONS
    from laplace_equivariance.schedule import OPTIMIZERS

    assert [m.value for m in run_config.Optimizer] == list(OPTIMIZERS)
    assert [m.value for m in run_config.KfacApprox] == list(KFAC_APPROXIMATIONS)
