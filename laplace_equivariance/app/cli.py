"""The command line: ``laplace-equivariance train | evaluate | paths | report`` (and ``python -m``).

``train`` fits a model of :func:`laplace_equivariance.models.build` on a data set of
:data:`laplace_equivariance.data.datasets.DATASETS`, by MAP (unit priors) or with the Laplace
marginal likelihood (one prior per parameter tensor, so per path and per factor; ``--prior-structure
path`` shares one between a path's tensors), and writes to ``--out``: ``results.json``
(configuration, versions, device, test and training accuracy and NLL, marginal likelihood,
learned precisions, effective parameters, timings), ``model.pt``, ``training.png`` and, for
marginal-likelihood runs, ``symmetry.png``; ``run.json`` records the settings and version,
``checkpoint.pt`` is saved every epoch, and the same command again resumes from it (another
run in the same ``--out`` is refused, naming the settings that differ, unless
``--overwrite``). Settings that cannot give a valid run (a count below one, a
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
import json
import sys
import textwrap
import warnings
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

# the library (torch, laplace-torch) is imported when a command runs, not for --help or
# --version: importing torch alone takes seconds
from laplace_equivariance import __version__

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
        from laplace_equivariance.app import config

        config.add_train_arguments(train)
    if "evaluate" in commands:
        _add_evaluate_arguments(evaluate)
    if "paths" in commands:
        _add_paths_arguments(paths)
    if "report" in commands:
        _add_report_arguments(report)
    return parser


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
    args = _parser({command} & set(COMMANDS)).parse_args(argv)
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
    from laplace_equivariance.app import config, summary
    from laplace_equivariance.app.experiment import (
        _interrupted,
        evaluate,
        path_outputs,
        report,
        train,
    )

    if args.command == "train":
        settings = config.settings_from_arguments(args)
        config.check_settings(settings)  # one line naming the option, before anything is made
        written = args.out / "results.json"
        before = _file_state(written)
        try:
            with _one_line_not_learning_warnings():
                results = train(settings, args.out, overwrite=args.overwrite)
        except KeyboardInterrupt:
            print(_interrupted(settings, args.out), file=sys.stderr)
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
