"""A synthetic medical-KG-sized graph: the SMedBERT paper's fused KG size with power-law degrees.

274,163 entities, 4,390,726 triples, 56 relations, 26 types; Chung–Lu degrees (expected degree
∝ rank^-0.75); every entity has a Chinese ``rdfs:label`` and an ``rdf:type``. Written as
N-Triples (about 4.9 M lines). Deterministic for a seed. Used by benchmarks/kg_load.py and the
PEPR benchmark; not part of the test suite.

    .venv/bin/python benchmarks/synthetic_kg.py            # the full graph, cached in benchmarks/.cache
    .venv/bin/python benchmarks/synthetic_kg.py --smoke    # a tiny instance (SMOKE sizes) in a temporary folder
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

NUM_ENTITIES = 274_163
NUM_TRIPLES = 4_390_726
NUM_RELATIONS = 56
NUM_TYPES = 26
NAMESPACE = "http://example.org/kg/"
CACHE = Path(__file__).resolve().parent / ".cache"
#: the sizes of the tiny instance the benchmarks' ``--smoke`` modes generate
SMOKE = {"num_entities": 500, "num_triples": 3_000, "num_relations": 8, "num_types": 4}


def chung_lu_triples(
    num_entities: int, num_triples: int, num_relations: int, seed: int, exponent: float = 0.75
) -> np.ndarray:
    """(num_triples, 3) unique triples with heads and tails drawn ∝ a power-law weight."""
    rng = np.random.default_rng(seed)
    weights = (np.arange(1, num_entities + 1, dtype=np.float64)) ** -exponent
    probabilities = weights / weights.sum()
    # separate permutations so that out- and in-hubs differ
    out_rank, in_rank = rng.permutation(num_entities), rng.permutation(num_entities)
    triples = np.zeros((0, 3), dtype=np.int64)
    while len(triples) < num_triples:
        batch = int((num_triples - len(triples)) * 1.1) + 1000
        heads = out_rank[rng.choice(num_entities, size=batch, p=probabilities)]
        tails = in_rank[rng.choice(num_entities, size=batch, p=probabilities)]
        relations = rng.integers(0, num_relations, size=batch)
        keep = heads != tails
        triples = np.unique(np.concatenate([triples, np.stack([heads, relations, tails], 1)[keep]]), axis=0)
    return triples[rng.permutation(len(triples))[:num_triples]]


def write_ntriples(
    path: Path,
    seed: int = 0,
    *,
    num_entities: int = NUM_ENTITIES,
    num_triples: int = NUM_TRIPLES,
    num_relations: int = NUM_RELATIONS,
    num_types: int = NUM_TYPES,
) -> Path:
    rng = np.random.default_rng(seed + 1)
    triples = chung_lu_triples(num_entities, num_triples, num_relations, seed)
    types = rng.integers(0, num_types, size=num_entities)
    # labels: 2–6 random common CJK characters
    characters = np.array([chr(c) for c in range(0x4E00, 0x4E00 + 3000)])
    lengths = rng.integers(2, 7, size=num_entities)
    label_type = "<http://www.w3.org/2000/01/rdf-schema#label>"
    rdf_type = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        for entity in range(num_entities):
            label = "".join(characters[rng.integers(0, 3000, size=lengths[entity])])
            handle.write(
                f'<{NAMESPACE}e{entity}> {label_type} "{label}{entity}"@zh .\n'
                f"<{NAMESPACE}e{entity}> {rdf_type} <{NAMESPACE}Type{types[entity]}> .\n"
            )
        lines = []
        for head, relation, tail in triples.tolist():
            lines.append(f"<{NAMESPACE}e{head}> <{NAMESPACE}r{relation}> <{NAMESPACE}e{tail}> .\n")
            if len(lines) >= 100_000:
                handle.write("".join(lines))
                lines.clear()
        handle.write("".join(lines))
    temporary.rename(path)
    return path


def synthetic_ntriples(seed: int = 0) -> Path:
    """Path of the cached N-Triples file, generated on first use."""
    path = CACHE / f"synthetic_kg_seed{seed}.nt"
    if not path.is_file():
        write_ntriples(path, seed)
    return path


def describe(path: Path, seconds: float) -> None:
    """A Markdown table of what ``path`` holds: entities, relation triples, relations, types, lines, size."""
    entities, relations, types, links, lines = set(), set(), set(), 0, 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            lines += 1
            subject, predicate, rest = line.split(" ", 2)
            entities.add(subject)
            if predicate.startswith(f"<{NAMESPACE}r"):
                relations.add(predicate)
                links += 1
            elif predicate.endswith("#type>"):
                types.add(rest.rsplit(" ", 1)[0])
    print("| file | entities | relation triples | relations | types | lines | MB | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {path} | {len(entities):,} | {links:,} | {len(relations)} | {len(types)} | {lines:,} | "
        f"{path.stat().st_size / 1e6:.2f} | {seconds:.1f} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="write a tiny instance (SMOKE) to a temporary folder")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.smoke:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="kgplm-synthetic-kg-") as folder:
            path = write_ntriples(Path(folder) / f"synthetic_kg_seed{args.seed}.nt", args.seed, **SMOKE)
            describe(path, time.perf_counter() - started)
    else:
        path = synthetic_ntriples(args.seed)
        print(f"{path} ({path.stat().st_size / 1e6:.0f} MB) ready in {time.perf_counter() - started:.1f} s")
