"""The run configuration: one declaration of every train option, checked when made."""

import dataclasses
import json
import math
import re
from pathlib import Path

import pytest
import torch

from laplace_equivariance.app import cli, run_config
from laplace_equivariance.app.experiment import train
from laplace_equivariance.app.run_config import DEFAULTS, Method, RunConfig, Start


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


TINY_RUN = RunConfig(
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
"""One MAP epoch of a small CONV network on 64 digits, on one CPU thread."""


def test_train_takes_a_run_config_and_records_its_dict_form(tmp_path):
    torch.set_num_threads(2)  # the caller's count; the run's is 1
    results = train(TINY_RUN, tmp_path / "run")
    assert results["threads"] == 1 and torch.get_num_threads() == 2  # the caller's, restored
    assert results["settings"]["method"] == "map" and results["settings"]["start"] == "mixed"
    assert (
        json.loads((tmp_path / "run" / "results.json").read_text())["settings"]["model"] == "conv"
    )


def test_train_refuses_a_dict_with_a_key_that_is_no_setting(tmp_path):
    with pytest.raises(ValueError, match=r"\['epoch'\] is not a setting"):
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


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"epochs": 0}, "epochs must be at least 1, got 0"),
        ({"alpha": -1}, "alpha must be at least 1, got -1"),
        ({"subset": 0}, "subset must be at least 1, got 0"),
        ({"burnin": -1}, "burnin must be at least 0, got -1"),
        ({"lr": -1.0}, "lr must be above 0, got -1.0"),
        ({"lr": math.inf}, "lr must be finite, got inf"),
        ({"prior_prec_init": 0.0}, "prior_prec_init must be above 0"),
        ({"prior_prec_init": math.inf}, "prior_prec_init must be finite"),
        ({"temperature": 0.0}, "temperature must be above 0"),
        ({"temperature": math.inf}, "temperature must be finite"),
        ({"lr_min": -1.0}, "lr_min must be at least 0 and at most the learning rate lr"),
        ({"lr": 0.01, "lr_min": 0.1}, r"lr_min must be .* at most the learning rate lr \(0.01\)"),
        ({"epochs": "20"}, "epochs must be an integer, got '20'"),
        ({"lr": "0.1"}, "lr must be a number, got '0.1'"),
        ({"augment": "yes"}, "augment must be True or False"),
    ],
)
def test_a_value_outside_its_range_or_of_another_type_is_refused_naming_the_field(setting, message):
    """The docstring promised it; RunConfig(epochs=0), lr_min=-1 or epochs="20" were taken
    (lr_min=-1 trained to accuracy 0 and NLL 1.3e7 without an error)."""
    with pytest.raises(run_config.SettingError, match=f"^{message}") as refused:
        RunConfig(**setting)
    assert isinstance(refused.value, ValueError) and refused.value.field in setting
    assert refused.value.option_message.startswith("--")
    with pytest.raises(ValueError, match=f"^{message}"):
        RunConfig.from_settings(dict(DEFAULTS, **setting))


def test_valid_edges_of_the_ranges_are_taken():
    RunConfig(lr_min=0.003, lr=0.003, burnin=0, epochs=1, subset=1, temperature=2)
    RunConfig(lr=1, lr_min=1e-4, prior_prec_init=1, timeout=5)  # integers for numbers


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(DEFAULTS, epochs=0), "^epochs must be at least 1"),
        (dict(DEFAULTS, lr_min=-1.0), "^lr_min must be at least 0"),
        (dict(DEFAULTS, epochs="20"), "^epochs must be an integer"),
        ({k: v for k, v in DEFAULTS.items() if k != "alpha"}, r"lack \['alpha'\]"),
        (dict(DEFAULTS, model="f-fc", start="held"), "^start='held' silences the FC-type"),
    ],
    ids=["count", "lr-min", "type", "missing-key", "start"],
)
def test_train_refuses_settings_that_cannot_run_with_a_value_error(tmp_path, settings, message):
    """It raised SystemExit naming a flag, a TypeError, or KeyError 'alpha'."""
    with pytest.raises(ValueError, match=message):
        train(settings, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_enums_offer_what_the_training_code_accepts():
    """Optimizer and KfacApprox are made from the tuples that marglik_training checks."""
    from laplace_equivariance.curvature.rules import KFAC_APPROXIMATIONS
    from laplace_equivariance.marglik.schedule import OPTIMIZERS

    assert [m.value for m in run_config.Optimizer] == list(OPTIMIZERS)
    assert [m.value for m in run_config.KfacApprox] == list(KFAC_APPROXIMATIONS)


def _every_help() -> str:
    parser = cli._parser()
    commands = parser._subparsers._group_actions[0].choices.values()
    return "\n".join([parser.format_help(), *(c.format_help() for c in commands)])


def test_help_points_to_the_repositorys_pages_not_to_files_the_wheel_lacks(monkeypatch):
    """Issue 70: the help named docs/models.md and others, which an installed package lacks.
    Its links are whole on their lines (argparse's wrapping broke them at hyphens and at the
    width) and name pages the repository has."""
    monkeypatch.setenv("COLUMNS", "80")
    text = _every_help()
    assert not re.search(r"(?<![/\w])(docs|benchmarks|studies|pages|examples)/", text)
    urls = re.findall(r"https?://[^\s)\],;]+", text)
    assert urls
    root = Path(__file__).resolve().parents[2]
    for url in urls:
        page = url.removeprefix(f"{run_config.REPOSITORY_URL}/blob/main/")
        assert page != url and (root / page).is_file(), url


def test_fit_batch_size_reaches_the_fits_and_is_a_circumstance(tmp_path, monkeypatch):
    """The option that shows what a new train option takes: a field of RunConfig and the call
    that passes it on (EquivariantKFAC's fit_batch_size); the command line, the record, the
    grouping of runs and resuming read the field's metadata."""
    from laplace_equivariance.app import experiment, runs, summary

    seen = {}

    def recording(model, loader, **kwargs):
        seen["backend_kwargs"] = kwargs["backend_kwargs"]
        return experiment_training(model, loader, **kwargs)

    experiment_training = experiment.marglik_training
    monkeypatch.setattr(experiment, "marglik_training", recording)
    argv = ["train", "--model", "f-fc+conv", "--alpha", "1", "--epochs", "1", "--burnin", "0"]
    argv += ["--marglik-frequency", "1", "--hypersteps", "1", "--subset", "64"]
    argv += ["--test-subset", "32", "--threads", "1", "--device", "cpu", "--seed", "0"]
    out = tmp_path / "run"
    assert cli.main([*argv, "--fit-batch-size", "64", "--out", str(out)]) == 0
    assert seen["backend_kwargs"] == {"fit_batch_size": 64}
    recorded = json.loads((out / "results.json").read_text())["settings"]
    assert recorded["fit_batch_size"] == 64
    assert "fit_batch_size" in runs.NOT_RESULT_SETTINGS
    assert "fit_batch_size" in summary.NOT_THE_EXPERIMENT
    assert runs.migrated({})["fit_batch_size"] is None  # older records: the loader's batches
    with pytest.raises(SystemExit, match="--fit-batch-size does not apply to --method map"):
        cli.config_from_arguments(
            cli._parser().parse_args(
                ["train", "--method", "map", "--fit-batch-size", "64", "--out", "x"]
            )
        )
    with pytest.raises(run_config.SettingError, match="^fit_batch_size must be at least 1"):
        RunConfig(fit_batch_size=0)


def test_train_restores_the_callers_thread_count_when_it_refuses_a_run(tmp_path):
    torch.set_num_threads(2)
    settings = RunConfig(dataset="quadrant-mnist-digit", model="conv", subset=10**6, threads=1)
    with pytest.raises(ValueError, match="subset"):
        train(settings, tmp_path / "run")
    assert torch.get_num_threads() == 2
