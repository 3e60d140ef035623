"""The command line: ``laplace-equivariance train | evaluate | paths | report`` (and ``python -m``).

``train`` fits a model of :func:`laplace_equivariance.models.build` on a data set of
:data:`laplace_equivariance.data.datasets.DATASETS`, by MAP (unit priors) or with the Laplace
marginal likelihood (one prior per parameter tensor, so per path and per factor; ``--prior-structure
path`` shares one between a path's tensors), and writes to ``--out``: ``results.json``
(configuration, versions, device, test and training accuracy and NLL, marginal likelihood,
learned precisions, effective parameters, timings), ``model.pt``, ``training.png`` and, for
marginal-likelihood runs, ``symmetry.png``; ``run.json`` records the settings and version,
``checkpoint.pt`` is saved every epoch (or every ``--checkpoint-every``), and the same command
again resumes from it (another run in the same ``--out`` is refused, naming the settings that
differ, unless ``--overwrite``). Settings that cannot give a valid run (a count below one, a
marginal-likelihood run too short for any marginal-likelihood step, a device this machine
lacks, an ``--out`` that cannot be written) stop with one line before anything is created;
Ctrl-C prints the epoch the checkpoint holds. ``evaluate RUN [--split train]`` rebuilds
the model from ``model.pt`` and evaluates it on the run's test (or training) set.
``paths RUN`` prints each path's share of its layer's output energy
(:func:`~laplace_equivariance.path_output_shares`) on the run's first 1,000 training images,
which ``results.json`` of a relaxed model also records as ``path_outputs``.
``--config table1|table2|table3`` sets the paper's settings (App. F.1, F.6); every option
overrides them. S-layer lengthscales are MAP-trained weights by default; ``--lengthscale-mode
hyperparameter`` learns them with the marginal likelihood (``--lengthscale-derivative
total|partial``), and ``results.json`` records every basis's final lengthscale.

``--model invariant-weights`` trains the shallow network of "Learning Invariant Weights in
Neural Networks" (:mod:`laplace_equivariance.invariance`) instead, with ``--method elbo``
(the paper's, the default for this model), ``laplace`` (its output layer's Laplace marginal
likelihood, on ``--marglik-subset`` examples, default 500) or ``likelihood``;
``results.json`` then records the learned ``eta`` per epoch (no checkpoint).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import json
import sys
import textwrap
import warnings
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# the library (torch, laplace-torch) is imported when a command runs, not for --help or
# --version: importing torch alone takes seconds
from laplace_equivariance import __version__

if TYPE_CHECKING:
    from laplace_equivariance.app.run_config import RunConfig

COMMANDS = ("train", "evaluate", "paths", "report")
"""The subcommands."""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped at spaces only: a link stays whole.

    argparse breaks a link at its hyphens and at the help's width; here one longer than the
    width overflows a line of its own.
    """

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


def _parser(commands: Collection[str] = COMMANDS) -> argparse.ArgumentParser:
    """The command line's parser, with the arguments of ``commands`` (default: all).

    Every subcommand is listed (its help); only those of ``commands`` get their arguments,
    which import the library.
    """
    parser = argparse.ArgumentParser(
        prog="laplace-equivariance",
        description="laplace-equivariance train | evaluate | paths | report: learn layer-wise "
        "equivariance with Kronecker-factored Laplace marginal likelihoods, evaluate the "
        "trained networks, measure their paths, and tabulate runs.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    train = subparsers.add_parser(
        "train",
        help="train a model (MAP or marginal likelihood)",
        description="Defaults in brackets; --config sets the paper's values of some, and every "
        "option given overrides them.",
        formatter_class=_HelpFormatter,
    )
    evaluate = subparsers.add_parser(
        "evaluate",
        help="evaluate a trained run on its test set (or, --split train, its training set)",
        description="Accuracy and NLL of the trained network's own softmax (the MAP weights, "
        "as results.json reports them), or with --predictive glm of its Laplace predictive.",
    )
    paths = subparsers.add_parser(
        "paths",
        help="each path's share of its layer's output on a trained run's training images",
        description="Each relaxed layer's paths' shares of the layer's output energy on the "
        "run's first training images, as JSON (results.json records them as path_outputs).",
    )
    report = subparsers.add_parser("report", help="print a table of runs")
    if "train" in commands:
        add_train_arguments(train)
    if "evaluate" in commands:
        _add_evaluate_arguments(evaluate)
    if "paths" in commands:
        _add_paths_arguments(paths)
    if "report" in commands:
        _add_report_arguments(report)
    return parser


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """``train``'s arguments: ``--config``, one option per setting, ``--out``, ``--overwrite``.

    One ``--option`` per :class:`~laplace_equivariance.app.run_config.RunConfig` field, its type,
    choices and help read from the field; each defaults to None (not given), so that
    :func:`config_from_arguments` lets ``--config`` and the defaults fill in only what the
    command line leaves out.
    """
    from laplace_equivariance.app.config import CONFIGS
    from laplace_equivariance.app.run_config import DEFAULTS, RunConfig, field_type

    parser.add_argument(
        "--config", choices=sorted(CONFIGS), help="the paper's settings for a table (none)"
    )
    for f in dataclasses.fields(RunConfig):
        meta, kind = f.metadata, field_type(f.name)
        shown = meta["shown"]
        if shown is None:
            default = DEFAULTS[f.name]
            shown = "off" if default is False else str(default)
        network = f"{meta['network']}: " if meta["network"] else ""
        options: dict[str, Any] = {"help": f"{network}{meta['help']} [{shown}]"}
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction if meta["switch"] else "store_true"
            options["default"] = None
        elif issubclass(kind, enum.Enum):
            options["choices"] = [member.value for member in meta["choices"] or kind]
        elif meta["choices"]:
            options["choices"] = meta["choices"]
        elif kind in (int, float):
            options["type"] = kind
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, **options)
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for the run's files; the same command again resumes the run there",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete another run's files in --out and start afresh (a folder holding another "
        "run is otherwise refused) [off]",
    )


def config_from_arguments(args: argparse.Namespace) -> RunConfig:
    """A run's configuration from parsed :func:`add_train_arguments`, checked.

    The defaults, then ``--config``'s values, then every option given; the start resolved and
    the settings checked (:func:`~laplace_equivariance.app.config.check_run`).

    Raises:
        SystemExit: One line naming the option, for settings that cannot give a valid run, a
            method that does not go with the model, or an option the run would not use.
    """
    from laplace_equivariance.app.config import CONFIGS, check_run
    from laplace_equivariance.app.run_config import DEFAULTS, INVARIANT_WEIGHTS, SettingError
    from laplace_equivariance.invariance import OBJECTIVES

    settings = dict(DEFAULTS)
    if args.config:
        settings.update(CONFIGS[args.config])
    given = {k for k, v in vars(args).items() if k in DEFAULTS and v is not None}
    settings.update({k: getattr(args, k) for k in given})
    invariant = settings["model"] == INVARIANT_WEIGHTS
    if invariant and args.method is None:
        settings["method"] = "elbo"
    if invariant != (settings["method"] in OBJECTIVES):
        raise SystemExit(
            f"--method {settings['method']} does not go with --model {settings['model']}: "
            f"{INVARIANT_WEIGHTS} takes {OBJECTIVES}, the other models map or marglik."
        )
    try:
        config = check_run(settings)
    except SettingError as error:
        raise SystemExit(error.option_message) from None
    except ValueError as error:
        raise SystemExit(str(error)) from None
    _check_applicable(config, given)
    return config


def _check_applicable(config: RunConfig, given: set[str]) -> None:
    """Refuse options given on the command line that the run would not use.

    Recorded in ``run.json`` as if they took effect, they would describe a run that did
    not happen (a MAP run "with the Monte-Carlo Fisher", a CONV network "with a fixed
    lengthscale").

    Raises:
        SystemExit: One line naming the first such option and what to do.
    """
    from laplace_equivariance.app.config import INVARIANT_ONLY, MARGINAL_LIKELIHOOD_ONLY
    from laplace_equivariance.app.run_config import INVARIANT_WEIGHTS, Method

    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    if config.method is Method.MAP:
        unused = [k for k in MARGINAL_LIKELIHOOD_ONLY if k in given]
        if unused:
            raise SystemExit(
                f"{flag(unused[0])} does not apply to --method map (no marginal likelihood is "
                "fitted): drop it, or use --method marglik."
            )
    unused = [k for k in INVARIANT_ONLY if k in given and not config.invariant]
    if unused:
        raise SystemExit(
            f"{flag(unused[0])} sets the {INVARIANT_WEIGHTS} network; --model "
            f"{config.model} does not have it: drop it."
        )
    relaxed_only = [k for k in ("prior_prec_init", "temperature") if k in given]
    if config.invariant and relaxed_only:
        raise SystemExit(
            f"{flag(relaxed_only[0])} sets the relaxed networks' priors and fits; the "
            f"{INVARIANT_WEIGHTS} network has its own (its --method): drop it."
        )
    if "lengthscale_mode" in given and not any(
        kind.startswith("s-") for kind in config.model.split("+")
    ):
        raise SystemExit(
            f"--lengthscale-mode sets the S-layers' lengthscale; --model {config.model} "
            "has none (use s-fc, s-conv or s-fc+s-conv): drop it."
        )


def _add_evaluate_arguments(evaluate: argparse.ArgumentParser) -> None:
    from laplace_equivariance.app.experiment import PREDICTIVES

    evaluate.add_argument("run", type=Path, help="the --out folder of a train run")
    evaluate.add_argument(
        "--split",
        choices=("test", "train"),
        default="test",
        help="the run's test set (default) or its training set",
    )
    evaluate.add_argument(
        "--predictive",
        choices=PREDICTIVES,
        default="map",
        help="map: the network's own softmax (as results.json) [default]; glm: the GLM "
        "predictive (probit) of its Laplace approximation, refitted at the learned precisions",
    )


def _add_paths_arguments(paths: argparse.ArgumentParser) -> None:
    from laplace_equivariance.app.experiment import PATH_OUTPUT_EXAMPLES

    paths.add_argument("run", type=Path, help="the --out folder of a train run")
    paths.add_argument(
        "--examples",
        type=int,
        default=PATH_OUTPUT_EXAMPLES,
        help=f"training images to measure on [{PATH_OUTPUT_EXAMPLES}]",
    )


def _add_report_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument("runs", type=Path, nargs="+", help="--out folders of train runs")
    report.add_argument(
        "--markdown",
        action="store_true",
        help="a markdown table with one row per experiment: mean ± std over its seeds, the "
        "evaluated epoch, budget, device and threads",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    # the command is the first word that is no option (the parser's own take no value)
    command = next((word for word in argv if not word.startswith("-")), None)
    args = _parser([name for name in COMMANDS if name == command]).parse_args(argv)
    try:
        return _dispatch(args)
    except (FileNotFoundError, ImportError) as error:  # a missing run, data set or package
        raise SystemExit(str(error)) from None


@contextlib.contextmanager
def _one_line_not_learning_warnings() -> Iterator[None]:
    """Print a :class:`NotLearningWarning` as ``warning: MESSAGE`` on stderr.

    Without the file, line and source that Python's format adds, which name the package's
    code, not anything a user of the command line can change. Other warnings are unchanged.
    """
    import tqdm

    from laplace_equivariance.marglik.chance import NotLearningWarning

    show = warnings.showwarning

    def one_line(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, NotLearningWarning):
            tqdm.tqdm.write(f"warning: {message}", file=sys.stderr)  # below a running bar
        else:
            show(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.showwarning = one_line
        yield


def _file_state(path: Path) -> tuple[int, int, int] | None:
    """``path``'s inode, size and modification time (None if absent): a write changes them."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; see :func:`main`."""
    from laplace_equivariance.app import summary
    from laplace_equivariance.app.experiment import (
        _interrupted,
        evaluate,
        path_outputs,
        report,
        train,
    )
    from laplace_equivariance.app.run_config import SettingError

    if args.command == "train":
        run = config_from_arguments(args)  # one line naming the option, before anything is made
        written = args.out / "results.json"
        before = _file_state(written)
        try:
            with _one_line_not_learning_warnings():
                results = train(run, args.out, overwrite=args.overwrite)
        except SettingError as error:  # one the data decide: a subset larger than the data
            raise SystemExit(error.option_message) from None
        except KeyboardInterrupt:
            print(_interrupted(run, args.out), file=sys.stderr)
            return 130
        if results is not None:  # rank 0 (or the only process)
            print(json.dumps(results["test"]))
            if before is not None and _file_state(written) == before:
                print(f"{written} is unchanged (the run was already finished)")
            else:
                print(f"wrote {written}")
    elif args.command == "evaluate":
        try:
            print(json.dumps(evaluate(args.run, args.split, args.predictive)))
        except ValueError as error:  # a corrupt results.json
            raise SystemExit(str(error)) from None
    elif args.command == "paths":
        if args.examples < 1:
            raise SystemExit(f"--examples must be at least 1, got {args.examples}.")
        try:
            print(json.dumps(path_outputs(args.run, args.examples)))
        except ValueError as error:  # a corrupt results.json, a model without relaxed layers
            raise SystemExit(str(error)) from None
    else:
        try:
            print(summary.markdown(args.runs) if args.markdown else report(args.runs))
        except ValueError as error:  # a corrupt results.json, a run named twice
            raise SystemExit(str(error)) from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
