"""One ``kgplm train`` call on a quiet and on a busy machine, under each thread setting.

Run: ``python benchmarks/busy_machine.py [--steps 40] [--busy 2] [--repeats 1]`` (``--smoke``: 1 step, 1 busy
process, the default setting only, for the tests).

The call is the tiny SMedBERT of ``benchmarks/soak.py`` on the toy graph, run as ``kgplm train`` in a
subprocess with its vocabulary, KG embeddings and PEPR table prepared once beforehand (the corpus is
linked in each call). Settings:

* ``spinning, all cores``: every core for torch and numba with ``OMP_WAIT_POLICY=ACTIVE`` (idle OpenMP
  threads spin), how kgplm ran before it sized its pools;
* ``default``: ``num_threads`` left to its default (the cores this process may use) and the ``kgplm``
  command's ``OMP_WAIT_POLICY=PASSIVE``;
* ``num_threads=1``: one thread, as advised on a machine shared with other busy processes.

Each runs with no neighbour and beside ``--busy`` processes that each keep a core busy
(``while True: pass``). Prints a table of wall times (median of ``--repeats``) and the 1-minute load
average when each measurement started. Only meaningful on a machine nothing else loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak import REPO_ROOT, command, write_corpus  # noqa: E402

SETTINGS = {
    "spinning, all cores": ({"OMP_WAIT_POLICY": "ACTIVE"}, ["--num-threads", "ALL"]),
    "default": ({}, []),
    "num_threads=1": ({}, ["--num-threads", "1"]),
}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _argv(corpus: Path, output_dir: Path, steps: int, extra: list[str]) -> list[str]:
    argv = command(corpus, output_dir, steps, checkpoint_every=max(steps, 1))
    at = argv.index("--num-threads")
    del argv[at : at + 2]  # the setting decides
    return argv + [str(_cores()) if value == "ALL" else value for value in extra]


def _environment(extra: dict[str, str]) -> dict[str, str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS")
    }
    return {**environment, "PYTHONPATH": str(REPO_ROOT), **extra}


def timed_run(corpus: Path, prepared: Path, work: Path, steps: int, setting: str) -> float:
    """Seconds of one call into a new directory, given the prepared run's vocabulary and KG artefacts."""
    import shutil

    output_dir = work / f"run-{time.monotonic_ns()}"
    environment, extra = SETTINGS[setting]
    artefacts = [
        "--tokenizer",
        str(prepared / "tokenizer"),
        "--kg-embeddings",
        str(prepared / "kg" / "embeddings"),
        "--neighbor-table",
        str(prepared / "kg" / "neighbors.npz"),
    ]
    started = time.monotonic()
    subprocess.run(
        _argv(corpus, output_dir, steps, extra + artefacts),
        cwd=REPO_ROOT,
        env=_environment(environment),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - started
    shutil.rmtree(output_dir, ignore_errors=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--busy", type=int, default=2, help="busy neighbour processes in the loaded case")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--work-dir", default=None, help="default: a temporary directory")
    parser.add_argument("--smoke", action="store_true", help="1 step, 1 busy process, the default setting")
    args = parser.parse_args(argv)
    settings = list(SETTINGS)
    if args.smoke:
        args.steps, args.busy, args.repeats, settings = 1, 1, 1, ["default"]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="kgplm-busy-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work / "notes.txt")
    prepared = work / "prepared"
    subprocess.run(
        _argv(corpus, prepared, 1, ["--num-threads", "1"]),
        cwd=REPO_ROOT,
        env=_environment({}),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    print(f"{args.steps} steps of a tiny SMedBERT on {_cores()} cores; median of {args.repeats}")
    print("| setting | neighbours | wall time (s) | load average at start |")
    print("|---|---:|---:|---:|")
    for busy in (0, args.busy):
        neighbours = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            for setting in settings:
                load = os.getloadavg()[0]
                seconds = statistics.median(
                    timed_run(corpus, prepared, work, args.steps, setting) for _ in range(args.repeats)
                )
                print(f"| {setting} | {busy} | {seconds:.1f} | {load:.2f} |", flush=True)
        finally:
            for process in neighbours:
                process.kill()
                process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
