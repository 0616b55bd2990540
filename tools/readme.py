"""Write the tables of README.md and of the documentation that come from the code and the results files.

    python -m tools.readme            # rewrite the generated blocks in place
    python -m tools.readme --check    # exit 1 when a generated block is not current (the tests run this)

Each table sits between two HTML comments; everything outside the markers is written by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the committed results of the replication study's protocol-v4 primary table (every method)
RESULTS_NAME = "experiments/results/replicate-primary.json"
RESULTS = REPO_ROOT / RESULTS_NAME
#: the committed results of protocol v5, one file per re-tested family; a method found in one of them is
#: reported from it, the others from :data:`RESULTS_NAME`
V5_RESULTS = ("experiments/results/replicate-v5-smedbert.json", "experiments/results/replicate-v5-kebiolm.json")


def _primary_results() -> tuple[dict[str, list[dict]], dict]:
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    return {name: family.get("primary", []) for name, family in results["families"].items()}, results


def _v5_results() -> dict[str, tuple[str, dict]]:
    """Method → (its protocol-v5 results file, the results) for every v5 file committed so far."""
    found = {}
    for name in V5_RESULTS:
        path = REPO_ROOT / name
        if path.exists():
            results = json.loads(path.read_text(encoding="utf-8"))
            for method in results["families"]:
                found[method] = (name, results)
    return found


def _cell(results: dict, row: str, column: str) -> str:
    for table in results["tables"].values():
        cell = table.get("cells", {}).get(row, {}).get(column)
        if cell is not None:
            mean, half = 100 * cell["mean"], 100 * (cell.get("half_width") or 0.0)
            return f"{mean:.1f} ± {half:.1f}" if half else f"{mean:.1f}"
    return "—"


def _status(entry: dict) -> str:
    status = entry["status"]
    if status.startswith("supported"):
        return "**supported**"
    if status.startswith("not supported"):
        return "not supported"
    if status.startswith("not detected"):
        effect = entry.get("minimal_detectable_effect")
        return "not detected" + ("" if effect is None else f" (smallest detectable effect {100 * effect:.1f})")
    return status.split(" (")[0].replace(" degenerate runs", " runs learnt nothing beyond a constant")


def _p_text(value) -> str:
    if value is None:
        return "—"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _baseline(results: dict, name_start: str, column: str) -> str:
    """The score of the baseline row whose name starts with ``name_start`` in ``column``, ×100."""
    for baselines in results["baselines"].values():
        for name, values in baselines.items():
            if name.startswith(name_start) and values.get(column) is not None:
                return f"{100 * values[column]:.1f}"
    return "—"


def _v4_entries(exclude: set[tuple[str, str]]) -> tuple[dict[str, list[dict]], dict]:
    """Protocol v4's primary entries per method, without the (method, endpoint) pairs in ``exclude``."""
    primary, results = _primary_results()
    kept = {
        name: [entry for entry in entries if (name, entry["endpoint"]) not in exclude]
        for name, entries in primary.items()
    }
    return {name: entries for name, entries in kept.items() if entries}, results


def _v5_endpoints(v5: dict[str, tuple[str, dict]]) -> set[tuple[str, str]]:
    """The (method, endpoint) pairs a protocol-v5 results file measured."""
    return {
        (method, entry["endpoint"])
        for method, (_, results) in v5.items()
        for entry in results["families"][method]["primary"]
    }


def methods_table() -> str:
    """The registered methods: name, paper, what each adds, its primary endpoints and each claim's status
    (from protocol v5 where it measured the endpoint, a secondary test there so marked, else from protocol v4,
    so marked)."""
    from kgplm.methods import available, get

    v5 = _v5_results()
    v4, _ = _v4_entries(_v5_endpoints(v5))
    lines = [
        "| method | paper | what it adds | primary endpoint (vs its control) | claim at small scale |",
        "|---|---|---|---|---|",
    ]
    for name in available():
        spec = get(name)
        endpoints = (v5[name][1]["families"][name]["primary"] if name in v5 else []) + [
            {**entry, "protocol": "v4"} for entry in v4.get(name, [])
        ]
        if not endpoints:
            lines.append(f"| `{name}` | {spec.paper} | {spec.summary} | — (a baseline) | — |")
            continue
        endpoint_text = "; ".join(e["endpoint"] for e in endpoints)
        status_text = "; ".join(
            _status(e)
            + (" as a secondary test" if e.get("secondary") else "")
            + (" (protocol v4)" if v5 and e.get("protocol") == "v4" else "")
            for e in endpoints
        )
        lines.append(f"| `{name}` | {spec.paper} | {spec.summary} | {endpoint_text} | {status_text} |")
    return "\n".join(lines)


def headline_table() -> str:
    """Each pre-registered primary endpoint: those protocol v5 measured first, then protocol v4's others."""
    v5 = _v5_results()
    return "\n\n".join(part for part in (_v5_headline(v5), _v4_headline(_v5_endpoints(v5))) if part)


def _v5_headline(v5: dict[str, tuple[str, dict]]) -> str:
    """The protocol-v5 endpoints: the base, the control, the method, the memorisation baseline and the tests."""
    entries = [
        (method, results, entry)
        for method, (_, results) in v5.items()
        for entry in results["families"][method]["primary"]
    ]
    if not entries:
        return ""
    files = sorted({name for name, _ in v5.values()})
    protocol = entries[0][1]["protocol_file"]
    seeds = sorted({entry["n"] for _, _, entry in entries})
    lines = [
        f"Protocol v5 (`{protocol}`). Test scores × 100, mean ± 95 % t half-width over "
        f"{', '.join(map(str, seeds))} pre-training seeds; δ is the method's mean per-seed difference from its "
        "control; p (t) and p (sign-flip) are Holm-adjusted over the method's endpoints, and supported needs "
        "both below 0.05; memorisation tags the fine-tuning training split's own mention strings "
        f"({', '.join(f'`{name}`' for name in files)}).",
        "",
        "| method | endpoint | base | control | method | memorisation | δ | p (t) | p (sign-flip) | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for method, results, entry in entries:
        base = next((row["name"] for row in results["rows"] if row["role"] == "base"), None)
        column = entry["column"]
        verdict = _status(entry) + (f" as a secondary test ({entry['secondary']})" if entry.get("secondary") else "")
        lines.append(
            f"| `{method}` | {entry['endpoint']} | "
            f"{_cell(results, base, column) if base else '—'} | {_cell(results, entry['against'], column)} | "
            f"{_cell(results, entry['row'], column)} | {_baseline(results, 'memorisation', column)} | "
            f"{100 * entry['difference']:+.1f} | {_p_text(entry.get('p_t_holm'))} | "
            f"{_p_text(entry.get('p_permutation_holm'))} | {verdict} |"
        )
    return "\n".join(lines)


def _v4_headline(exclude: set[tuple[str, str]]) -> str:
    """Protocol v4's endpoints, without those protocol v5 measured (``exclude``: (method, endpoint) pairs)."""
    primary, results = _v4_entries(exclude)
    if not primary:
        return ""
    seeds = {entry["n"] for entries in primary.values() for entry in entries}
    lines = [
        ("Protocol v4, not re-tested under v5. " if exclude else "")
        + f"Test scores × 100, mean ± 95 % t half-width over {', '.join(map(str, sorted(seeds)))} pre-training "
        f"seeds; δ is the mean per-seed difference, p (t) the pre-registered paired t-test "
        f"(`{RESULTS_NAME}`, {results['date']}, {results['device']}, "
        f"{results['machine']['cpus']} CPUs).",
        "",
        "| method | primary endpoint | method | its control | δ | p (t) | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for name, entries in primary.items():
        for entry in entries:
            lines.append(
                f"| `{name}` | {entry['endpoint']} | {_cell(results, entry['row'], entry['column'])} | "
                f"{_cell(results, entry['against'], entry['column'])} | {100 * entry['difference']:+.1f} | "
                f"{_p_text(entry['p_t'])} | {_status(entry)} |"
            )
    return "\n".join(lines)


def _method_table() -> str:
    from kgplm.methods import method_table

    return method_table()


def _claim_table() -> str:
    sys.path.insert(0, str(REPO_ROOT))  # experiments/ is a folder of the repository, not part of kgplm
    from experiments.study import claim_table

    return claim_table()


#: file -> [(start marker, end marker, the function that writes the block)]
BLOCKS = {
    "README.md": [
        ("<!-- methods table: generated by python -m tools.readme -->", "<!-- end of methods table -->", methods_table),
        (
            "<!-- headline table: generated by python -m tools.readme -->",
            "<!-- end of headline table -->",
            headline_table,
        ),
    ],
    "docs/methods/index.md": [
        (
            "<!-- method table: generated by kgplm.methods.method_table() -->",
            "<!-- end of method table -->",
            _method_table,
        ),
    ],
    "docs/knowledge/index.md": [
        (
            "<!-- claim table: generated by experiments/study.py claim_table() -->",
            "<!-- end of claim table -->",
            _claim_table,
        ),
    ],
}


def render(text: str, blocks) -> str:
    """``text`` with every generated block between its markers written anew."""
    for start_marker, end_marker, write in blocks:
        start, end = text.index(start_marker) + len(start_marker), text.index(end_marker)
        text = text[:start] + "\n" + write().strip() + "\n" + text[end:]
    return text


def stale_files() -> list[str]:
    """The files whose generated blocks are not current."""
    return [
        name
        for name, blocks in BLOCKS.items()
        if render((REPO_ROOT / name).read_text(encoding="utf-8"), blocks)
        != (REPO_ROOT / name).read_text(encoding="utf-8")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a block is not current")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for name in stale:
            print(f"{name}: generated tables are not current; run python -m tools.readme", file=sys.stderr)
        return 1 if stale else 0
    for name, blocks in BLOCKS.items():
        path = REPO_ROOT / name
        text = path.read_text(encoding="utf-8")
        new = render(text, blocks)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
