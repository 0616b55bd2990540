"""Watching training: TensorBoard event files and PNG plots of the loss curves.

``kgplm.train(report_to=("tensorboard",))`` writes every record the loop logs to ``metrics.jsonl``
(the total loss, each objective's loss, each metric and the learning rate) to
``RUN_DIR/tensorboard/`` as scalars ``pretrain/<name>`` at the record's step;
``kgplm.finetune(report_to=("tensorboard",))`` writes each epoch's training loss, learning rate
and dev scores as ``finetune/<name>`` at the epoch. Open them with ``tensorboard --logdir RUN_DIR``
(``pip install 'kgplm[watch]'``).

:func:`plot_run` draws a run's curves to a PNG with matplotlib (``kgplm plot RUN_DIR``,
``TrainingResult.plot()``): one panel of losses per objective, one of the other metrics.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from kgplm.exceptions import ConfigurationError, MissingFileError

__all__ = ["REPORTERS", "check_report_to", "open_reporters", "plot_curves", "plot_run", "TENSORBOARD_DIR"]

logger = logging.getLogger(__name__)

#: the ``report_to`` values kgplm knows
REPORTERS = ("tensorboard",)
#: the folder of a run (or fine-tuning output) that holds the TensorBoard event files
TENSORBOARD_DIR = "tensorboard"


def check_report_to(report_to: str | Iterable[str] | None) -> tuple[str, ...]:
    """``report_to`` as a sorted tuple of known reporters (a single name is accepted)."""
    if report_to is None:
        return ()
    values = (report_to,) if isinstance(report_to, str) else tuple(report_to)
    unknown = [value for value in values if value not in REPORTERS]
    if unknown:
        raise ConfigurationError(f"report_to takes {REPORTERS}, got {unknown}")
    if "tensorboard" in values:
        try:
            import tensorboard  # noqa: F401  (torch.utils.tensorboard needs it)
        except ImportError:
            raise ConfigurationError(
                "report_to=('tensorboard',) needs the tensorboard package: "
                "pip install 'kgplm[watch]' (or pip install tensorboard)"
            ) from None
    return tuple(sorted(set(values)))


class _TensorBoard:
    """Writes each numeric field of a record as a scalar ``<prefix>/<field>`` at ``record[step_key]``."""

    def __init__(self, directory: Path, prefix: str, step_key: str) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(directory))
        self.prefix, self.step_key = prefix, step_key

    def __call__(self, record: dict[str, Any]) -> None:
        step = int(record[self.step_key])
        for name, value in record.items():
            if name != self.step_key and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{self.prefix}/{name}", float(value), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class open_reporters:
    """``with open_reporters(report_to, directory, prefix=..., step_key=...) as report: report(record)``.

    ``report`` is a no-op when ``report_to`` is empty (or on ranks other than 0: ``enabled=False``)."""

    def __init__(
        self,
        report_to: Sequence[str],
        directory: str | os.PathLike,
        *,
        prefix: str,
        step_key: str,
        enabled: bool = True,
    ) -> None:
        self.reporters: list = []
        if enabled and "tensorboard" in report_to:
            self.reporters.append(_TensorBoard(Path(directory) / TENSORBOARD_DIR, prefix, step_key))

    def __enter__(self) -> Callable[[dict[str, Any]], None]:
        return self

    def __call__(self, record: dict[str, Any]) -> None:
        for reporter in self.reporters:
            reporter(record)

    def __exit__(self, *exc) -> None:
        for reporter in self.reporters:
            reporter.close()


def _series(records: Sequence[dict[str, Any]], name: str, step_key: str) -> tuple[list[float], list[float]]:
    points = [
        (r[step_key], r[name]) for r in records if isinstance(r.get(name), (int, float)) and math.isfinite(r[name])
    ]
    return [p[0] for p in points], [p[1] for p in points]


def plot_curves(
    records: Sequence[dict[str, Any]],
    path: str | os.PathLike,
    *,
    losses: Sequence[str],
    step_key: str = "step",
    title: str = "",
) -> Path:
    """Draw ``losses`` (one line each) and every other numeric field but the learning rate (a second
    panel) of ``records`` against ``step_key``; write a PNG to ``path`` (via a temporary name)."""
    try:
        from matplotlib.figure import Figure  # drawn without pyplot: no display, no global state
    except ImportError:
        raise ConfigurationError(
            "plotting needs matplotlib: pip install 'kgplm[watch]' (or pip install matplotlib)"
        ) from None

    from kgplm._io import atomic_file

    if not records:
        raise ConfigurationError(f"nothing to plot: no logged record{f' in {title}' if title else ''}")
    others = sorted(
        {k for r in records for k, v in r.items() if isinstance(v, (int, float))}
        - set(losses)
        - {step_key, "learning_rate"}
    )
    figure = Figure(figsize=(10 if others else 6, 4), dpi=100)
    axes = figure.subplots(1, 2 if others else 1, squeeze=False)[0]
    for name in losses:
        xs, ys = _series(records, name, step_key)
        if xs:
            axes[0].plot(xs, ys, label=name)
    axes[0].set(xlabel=step_key, ylabel="loss", title=f"{title} losses".strip())
    axes[0].legend(fontsize="small")
    if others:
        for name in others:
            xs, ys = _series(records, name, step_key)
            if xs:
                axes[1].plot(xs, ys, label=name)
        axes[1].set(xlabel=step_key, title="metrics")
        axes[1].legend(fontsize="small")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as handle:
        figure.savefig(handle, format="png")
    logger.info("wrote the curves to %s", path)
    return path


def plot_run(directory: str | os.PathLike, output: str | os.PathLike | None = None) -> Path:
    """Plot a ``kgplm.train`` run (``metrics.jsonl``: the total loss and each objective's) or a
    ``kgplm.finetune`` output (``results.json``: training loss and dev scores per epoch) to ``output``
    (default ``DIRECTORY/curves.png``)."""
    directory = Path(directory)
    output = directory / "curves.png" if output is None else Path(output)
    if (directory / "metrics.jsonl").is_file():
        records = [
            json.loads(line)
            for line in (directory / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        method = None
        if (directory / "run_config.json").is_file():
            method = json.loads((directory / "run_config.json").read_text(encoding="utf-8")).get("method")
        losses = ["loss"]
        if method is not None:
            from kgplm.registry import available, get

            if method in available():
                losses += [name for name in get(method).losses if name != "loss"]
        return plot_curves(records, output, losses=losses, title=method or directory.name)
    if (directory / "results.json").is_file():
        results = json.loads((directory / "results.json").read_text(encoding="utf-8"))
        return plot_curves(
            results["history"],
            output,
            losses=["train_loss"],
            step_key="epoch",
            title=results.get("task", directory.name),
        )
    raise MissingFileError(
        directory / "metrics.jsonl",
        "training curve (a kgplm train run's metrics.jsonl, or a kgplm finetune output's results.json)",
    )
