"""Loading a big RDF graph: rdflib vs kgplm's ``KGStore.from_rdf``, save, and warm ``load``.

Run: ``.venv/bin/python benchmarks/kg_load.py`` (``--skip-rdflib`` leaves out the 2–3 minute
rdflib anchor). The graph is the synthetic one of benchmarks/synthetic_kg.py (274,163 entities,
4,390,726 triples, 56 relations, 26 types, as N-Triples). Every step runs in a fresh Python
process so that peak memory (ru_maxrss) is the step's own. Prints a Markdown table.
``--smoke`` runs every step on the tiny instance of the same generator (``synthetic_kg.SMOKE``)
written to a temporary folder (the rdflib step only where rdflib is installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

STEPS = {
    "rdflib": """
import rdflib
graph = rdflib.Graph()
graph.parse(PATH, format="nt")
result["statements"] = len(graph)
""",
    "from_rdf": """
from kgplm import KGStore
store = KGStore.from_rdf(PATH, show_progress=False)
result["statements"] = store.num_triples
""",
    "from_rdf_one_process": """
from kgplm import KGStore
store = KGStore.from_rdf(PATH, workers=1, show_progress=False)
result["statements"] = store.num_triples
""",
    "save": """
from kgplm import KGStore
store = KGStore.from_rdf(PATH, show_progress=False)
started = time.perf_counter()
store.save(STORE)
result["seconds"] = time.perf_counter() - started
result["statements"] = store.num_triples
""",
    "load": """
from kgplm import KGStore
store = KGStore.load(STORE)
result["seconds"] = time.perf_counter() - started
result["statements"] = store.num_triples
hub = int(store.degrees()[0].argmax())
started = time.perf_counter()
result["note"] = f"neighbors() of the biggest hub ({len(store.neighbors(hub)):,} rows): {time.perf_counter() - started:.2f} s"
""",
}

RUNNER = """
import json, resource, sys, time
PATH, STORE = sys.argv[1], sys.argv[2]
result = {}
started = time.perf_counter()
%s
result.setdefault("seconds", time.perf_counter() - started)
result["peak_rss_gb"] = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1e6
print(json.dumps(result))
"""


def run_step(name: str, path: Path, store: Path) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", RUNNER % STEPS[name], str(path), str(store)], capture_output=True, text=True, check=True
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-rdflib", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="the tiny synthetic graph (synthetic_kg.SMOKE) in a temporary folder"
    )
    args = parser.parse_args()
    from synthetic_kg import SMOKE, synthetic_ntriples, write_ntriples

    if args.smoke and importlib.util.find_spec("rdflib") is None:
        args.skip_rdflib = True
    steps = ["from_rdf", "from_rdf_one_process", "save", "load"] + ([] if args.skip_rdflib else ["rdflib"])
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        path = write_ntriples(Path(scratch) / "synthetic_kg.nt", **SMOKE) if args.smoke else synthetic_ntriples()
        print(f"graph: {path} ({path.stat().st_size / 1e6:.0f} MB), ready in {time.perf_counter() - started:.1f} s\n")
        store = Path(scratch) / "store"
        for step in steps:
            result = run_step(step, path, store)
            rows.append((step, result))
            print(f"  {step}: {result}", file=sys.stderr)
    labels = {
        "rdflib": "rdflib `Graph().parse` (N-Triples)",
        "from_rdf": "`KGStore.from_rdf` cold (2 processes)",
        "from_rdf_one_process": "`KGStore.from_rdf` cold (workers=1)",
        "save": "`store.save` (npy + JSON)",
        "load": "`KGStore.load` warm (memory-mapped)",
    }
    print("| step | wall (s) | peak RSS (GB) | triples | note |")
    print("|---|---|---|---|---|")
    for step, result in rows:
        print(
            f"| {labels[step]} | {result['seconds']:.2f} | {result['peak_rss_gb']:.2f} | {result['statements']:,} "
            f"| {result.get('note', '')} |"
        )


if __name__ == "__main__":
    main()
