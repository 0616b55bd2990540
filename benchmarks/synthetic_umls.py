"""A UMLS-shaped Metathesaurus: MRCONSO, MRREL and MRSTY in the real RRF column layout.

The real files cannot ship (UMLS is licensed), so the scale figures of issue 30 are taken on this
stand-in, written with the shapes that make UMLS expensive to load:

* ``num_concepts`` concepts ``C0000001``…; about 4 strings per concept (1 + Poisson(3)), most in
  English, the rest Spanish, French, German, Chinese and Japanese, from several sources (SAB). The
  first string of each language is the concept's preferred one (TS=P, STT=PF, ISPREF=Y); a share of
  the other strings is suppressed (SUPPRESS O, E or Y), and some strings are shared between
  concepts (abbreviations), so names are ambiguous as in UMLS.
* MRREL: a heavy-tailed degree (each concept starts Zipf(2.0) relation pairs, capped at 500: about
  9.5 rows a concept; their other ends are drawn with a power law over a permutation of the
  concepts, so a few hubs collect most links), each relation written as UMLS writes it, a row
  and its inverse (PAR/CHD with isa/inverse_isa, RB/RN, RO with may_treat/may_be_treated_by and
  others, SY/SY, RQ/RQ), some rows with an empty RELA, some self-links and some suppressed rows.
* MRSTY: one or two semantic types per concept (T047, T121, …) drawn from a Zipf-shaped
  distribution over 24 of the real semantic types.

Deterministic for ``(num_concepts, seed, chunk_size)`` and streaming: concepts are generated chunk
by chunk with a generator seeded by ``(seed, table, chunk index)`` and written straight to the
files, so memory does not grow with ``num_concepts``. Sizes from a few concepts (tests) to 4M
(about 16M strings and 38M relation rows; about 5 GB of text).

    python benchmarks/synthetic_umls.py OUT_DIR --concepts 1M --seed 0
    python benchmarks/synthetic_umls.py --smoke     # 300 concepts in a temporary folder, a table of what it wrote
"""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

import numpy as np

__all__ = ["write_synthetic_umls", "parse_size", "LANGUAGES", "SEMANTIC_TYPES", "RELATION_PAIRS"]

#: LAT code, share of non-first strings, sources for that language
LANGUAGES = (
    ("ENG", 0.70, ("MSH", "SNOMEDCT_US", "NCI", "MTH", "MDR", "RXNORM")),
    ("SPA", 0.10, ("MSHSPA", "SCTSPA", "MDRSPA")),
    ("FRE", 0.07, ("MSHFRE", "MDRFRE")),
    ("GER", 0.05, ("MSHGER", "MDRGER")),
    ("CHI", 0.05, ("MSHCHI",)),
    ("JPN", 0.03, ("MSHJPN", "MDRJPN")),
)
#: (TUI, STN, STY) of real semantic types; drawn with Zipf weights in this order
SEMANTIC_TYPES = (
    ("T047", "B2.2.1.2.1", "Disease or Syndrome"),
    ("T121", "A1.4.1.1.1", "Pharmacologic Substance"),
    ("T109", "A1.4.1.2.1", "Organic Chemical"),
    ("T061", "B1.3.1.3", "Therapeutic or Preventive Procedure"),
    ("T023", "A1.2.3.1", "Body Part, Organ, or Organ Component"),
    ("T184", "A2.2.2", "Sign or Symptom"),
    ("T033", "A2.2", "Finding"),
    ("T116", "A1.4.1.2.1.7", "Amino Acid, Peptide, or Protein"),
    ("T028", "A1.2.3.5", "Gene or Genome"),
    ("T191", "B2.2.1.2.1.2", "Neoplastic Process"),
    ("T037", "B2.3", "Injury or Poisoning"),
    ("T059", "B1.3.1.1", "Laboratory Procedure"),
    ("T060", "B1.3.1.2", "Diagnostic Procedure"),
    ("T074", "A1.3.1", "Medical Device"),
    ("T046", "B2.2.1.2", "Pathologic Function"),
    ("T200", "A1.4.1.1.4", "Clinical Drug"),
    ("T126", "A1.4.1.1.3.3", "Enzyme"),
    ("T129", "A1.4.1.1.4", "Immunologic Factor"),
    ("T007", "A1.1.2", "Bacterium"),
    ("T005", "A1.1.4", "Virus"),
    ("T201", "A2.3", "Clinical Attribute"),
    ("T029", "A2.1.5.2", "Body Location or Region"),
    ("T048", "B2.2.1.2.1.1", "Mental or Behavioral Dysfunction"),
    ("T170", "A2.4", "Intellectual Product"),
)
#: (REL, RELA) of a row and (REL, RELA) of its inverse, with their shares of relation pairs
RELATION_PAIRS = (
    (("PAR", "inverse_isa"), ("CHD", "isa"), 0.30),
    (("RB", ""), ("RN", ""), 0.15),
    (("RO", "may_treat"), ("RO", "may_be_treated_by"), 0.08),
    (("RO", "has_finding_site"), ("RO", "finding_site_of"), 0.08),
    (("RO", "has_active_ingredient"), ("RO", "active_ingredient_of"), 0.06),
    (("RO", "associated_with"), ("RO", "associated_with"), 0.06),
    (("RO", "has_causative_agent"), ("RO", "causative_agent_of"), 0.05),
    (("RO", ""), ("RO", ""), 0.10),
    (("RQ", "classified_as"), ("RQ", "classifies"), 0.05),
    (("SY", ""), ("SY", ""), 0.04),
    (("PAR", ""), ("CHD", ""), 0.03),
)
_RELATION_SOURCES = ("SNOMEDCT_US", "MSH", "NCI", "MED-RT", "RXNORM", "MDR")
_SYLLABLES = (
    "car",
    "dio",
    "neu",
    "ro",
    "gas",
    "tro",
    "hep",
    "at",
    "itis",
    "oma",
    "pulm",
    "on",
    "ren",
    "al",
    "derm",
    "ost",
    "eo",
    "my",
    "ocyt",
    "lymph",
    "angi",
    "ectomy",
    "plasia",
    "trophy",
    "algia",
    "emia",
    "osis",
    "path",
    "ic",
    "ase",
    "ine",
    "ol",
    "ide",
    "mab",
    "cillin",
    "vir",
    "pril",
    "statin",
)
_WORDS_PER_LANGUAGE = 4000
_SUPPRESS_SHARE = 0.06  # of the non-preferred strings
_SHARED_STRING_SHARE = 0.02  # of the non-preferred strings: taken from a pool shared by every concept
_SELF_LINK_SHARE = 0.002
_SUPPRESSED_RELATION_SHARE = 0.01


def parse_size(text: str) -> int:
    """``"115k"`` → 115000, ``"4M"`` → 4000000, ``"250"`` → 250."""
    text = text.strip()
    scale = {"k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}.get(text[-1:], 1)
    number = float(text[:-1] if scale != 1 else text)
    if number <= 0:
        raise ValueError(f"a size must be positive, got {text!r}")
    return int(round(number * scale))


def _cui(index: int) -> str:
    return f"C{index + 1:07d}"


def _vocabularies(seed: int) -> list[list[str]]:
    """Per language a fixed list of made-up words (Latin-script languages from syllables, CJK from characters)."""
    rng = np.random.default_rng([seed, 99])
    vocabularies = []
    for lat, _, _ in LANGUAGES:
        if lat in ("CHI", "JPN"):
            base = 0x4E00 if lat == "CHI" else 0x30A0
            span = 3000 if lat == "CHI" else 90
            lengths = rng.integers(2, 5, size=_WORDS_PER_LANGUAGE)
            words = ["".join(chr(base + int(c)) for c in rng.integers(0, span, size=n)) for n in lengths]
        else:
            lengths = rng.integers(2, 5, size=_WORDS_PER_LANGUAGE)
            words = ["".join(_SYLLABLES[int(s)] for s in rng.integers(0, len(_SYLLABLES), size=n)) for n in lengths]
        vocabularies.append(words)
    return vocabularies


class _Writer:
    """A text file written to a temporary name and renamed when closed without error."""

    def __init__(self, path: Path, compress: bool) -> None:
        self.path = path
        self.temporary = path.with_name(path.name + ".tmp")
        self.handle = (
            gzip.open(self.temporary, "wt", encoding="utf-8", newline="")
            if compress
            else open(self.temporary, "w", encoding="utf-8", newline="")
        )

    def write(self, lines: list[str]) -> None:
        self.handle.write("".join(lines))

    def close(self) -> None:
        self.handle.close()
        os.replace(self.temporary, self.path)


def _conso_chunk(rng: np.random.Generator, start: int, stop: int, vocabularies, counters: dict) -> list[str]:
    n = stop - start
    language_share = np.array([share for _, share, _ in LANGUAGES])
    language_share /= language_share.sum()
    per_concept = 1 + rng.poisson(3.0, size=n)
    total = int(per_concept.sum())
    concepts = np.repeat(np.arange(start, stop), per_concept)
    first_row = np.concatenate([[0], np.cumsum(per_concept)[:-1]])
    languages = rng.choice(len(LANGUAGES), size=total, p=language_share)
    languages[first_row] = 0  # every concept has an English preferred string first
    # the first string of each (concept, language) is that language's preferred string
    keys = concepts.astype(np.int64) * len(LANGUAGES) + languages
    first_of_language = np.zeros(total, dtype=bool)
    first_of_language[np.unique(keys, return_index=True)[1]] = True
    shared = ~first_of_language & (rng.random(total) < _SHARED_STRING_SHARE)
    word_counts = rng.integers(1, 4, size=total)
    words_drawn = rng.integers(0, _WORDS_PER_LANGUAGE, size=(total, 3))
    variant = rng.integers(0, 3, size=total)
    suppressed = ~first_of_language & (rng.random(total) < _SUPPRESS_SHARE)
    suppress_kind = rng.integers(0, 3, size=total)
    source_pick = rng.integers(0, 1000, size=total)
    lines = []
    for row, (concept, language, first, common, count, picks, kind, hidden, hidden_kind, sab_pick) in enumerate(
        zip(
            concepts.tolist(),
            languages.tolist(),
            first_of_language.tolist(),
            shared.tolist(),
            word_counts.tolist(),
            words_drawn.tolist(),
            variant.tolist(),
            suppressed.tolist(),
            suppress_kind.tolist(),
            source_pick.tolist(),
        )
    ):
        lat, _, sources = LANGUAGES[language]
        words = vocabularies[language]
        if common:
            text = words[picks[0] % 200].upper()  # an abbreviation many concepts share
        else:
            separator = "" if lat in ("CHI", "JPN") else " "
            text = separator.join(words[p] for p in picks[:count]) + f" {concept}"
        if first:
            ts, stt, ispref, tty = "P", "PF", "Y", "PT"
        else:
            ts, stt, ispref, tty = "S", ("PF", "VO", "VC")[kind], "N", ("SY", "ET", "AB")[kind]
        suppress = ("O", "E", "Y")[hidden_kind] if hidden else "N"
        number = counters["strings"] + row + 1
        lines.append(
            f"{_cui(concept)}|{lat}|{ts}|L{concept + 1:07d}|{stt}|S{number:08d}|{ispref}|A{number:08d}|||"
            f"|{sources[sab_pick % len(sources)]}|{tty}|{concept}|{text}|0|{suppress}|256|\n"
        )
    counters["strings"] += total
    counters["suppressed_strings"] += int(suppressed.sum())
    return lines


def _rel_chunk(
    rng: np.random.Generator, start: int, stop: int, num_concepts: int, permutation: np.ndarray, counters: dict
) -> list[str]:
    n = stop - start
    pairs = np.minimum(rng.zipf(2.0, size=n), 500)
    total = int(pairs.sum())
    sources = np.repeat(np.arange(start, stop), pairs)
    # the other end: a power law over a fixed permutation, so a few concepts are hubs
    targets = permutation[np.minimum((num_concepts * rng.random(total) ** 3.0).astype(np.int64), num_concepts - 1)]
    self_links = rng.random(total) < _SELF_LINK_SHARE
    targets = np.where(self_links, sources, targets)
    shares = np.array([share for _, _, share in RELATION_PAIRS])
    kinds = rng.choice(len(RELATION_PAIRS), size=total, p=shares / shares.sum())
    suppressed = rng.random(total) < _SUPPRESSED_RELATION_SHARE
    relation_sources = rng.integers(0, len(_RELATION_SOURCES), size=total)
    lines = []
    for source, target, kind, hidden, sab in zip(
        sources.tolist(), targets.tolist(), kinds.tolist(), suppressed.tolist(), relation_sources.tolist()
    ):
        forward, inverse, _ = RELATION_PAIRS[kind]
        flag = "O" if hidden else "N"
        sab_name = _RELATION_SOURCES[sab]
        for (rel, rela), cui1, cui2 in ((forward, source, target), (inverse, target, source)):
            counters["relation_rows"] += 1
            lines.append(
                f"{_cui(cui1)}||CUI|{rel}|{_cui(cui2)}||CUI|{rela}|R{counters['relation_rows']:09d}||"
                f"{sab_name}|{sab_name}|||{flag}|256|\n"
            )
    return lines


def _sty_chunk(rng: np.random.Generator, start: int, stop: int, counters: dict) -> list[str]:
    n = stop - start
    weights = 1.0 / np.arange(1, len(SEMANTIC_TYPES) + 1)
    first = rng.choice(len(SEMANTIC_TYPES), size=n, p=weights / weights.sum())
    second = rng.choice(len(SEMANTIC_TYPES), size=n, p=weights / weights.sum())
    two = rng.random(n) < 0.15
    lines = []
    for offset in range(n):
        kinds = [int(first[offset])]
        if two[offset] and int(second[offset]) != kinds[0]:
            kinds.append(int(second[offset]))
        for kind in kinds:
            tui, stn, sty = SEMANTIC_TYPES[kind]
            counters["semantic_type_rows"] += 1
            lines.append(f"{_cui(start + offset)}|{tui}|{stn}|{sty}|AT{counters['semantic_type_rows']:08d}|256|\n")
    return lines


def write_synthetic_umls(
    directory: str | os.PathLike,
    num_concepts: int,
    *,
    seed: int = 0,
    chunk_size: int = 20_000,
    compress: bool = False,
    show_progress: bool = False,
) -> dict:
    """Write ``MRCONSO.RRF``, ``MRREL.RRF`` and ``MRSTY.RRF`` (``.RRF.gz`` with ``compress``) for
    ``num_concepts`` concepts into ``directory``; returns the row counts written."""
    if num_concepts < 1:
        raise ValueError(f"num_concepts must be at least 1, got {num_concepts}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".RRF.gz" if compress else ".RRF"
    vocabularies = _vocabularies(seed)
    permutation = np.random.default_rng([seed, 7]).permutation(num_concepts)
    counters = {
        "concepts": num_concepts,
        "strings": 0,
        "suppressed_strings": 0,
        "relation_rows": 0,
        "semantic_type_rows": 0,
    }
    writers = {table: _Writer(directory / f"{table}{suffix}", compress) for table in ("MRCONSO", "MRREL", "MRSTY")}
    chunks = range(0, num_concepts, chunk_size)
    if show_progress:
        from tqdm.auto import tqdm

        chunks = tqdm(chunks, desc="writing UMLS-shaped RRF", unit=" chunks")
    try:
        for index, start in enumerate(chunks):
            stop = min(start + chunk_size, num_concepts)
            writers["MRCONSO"].write(
                _conso_chunk(np.random.default_rng([seed, 1, index]), start, stop, vocabularies, counters)
            )
            writers["MRREL"].write(
                _rel_chunk(np.random.default_rng([seed, 2, index]), start, stop, num_concepts, permutation, counters)
            )
            writers["MRSTY"].write(_sty_chunk(np.random.default_rng([seed, 3, index]), start, stop, counters))
    except BaseException:
        for writer in writers.values():
            writer.handle.close()
            writer.temporary.unlink(missing_ok=True)
        raise
    for writer in writers.values():
        writer.close()
    return counters


#: the number of concepts ``--smoke`` writes
SMOKE_CONCEPTS = 300


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, nargs="?", help="where the RRF files are written")
    parser.add_argument("--concepts", default="1M", help="number of concepts: 250, 115k, 1M, 4M")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gzip", action="store_true", help="write .RRF.gz")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"write {SMOKE_CONCEPTS} concepts to a temporary folder and print a table of the files",
    )
    arguments = parser.parse_args(argv)
    if arguments.smoke:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="kgplm-synthetic-umls-") as folder:
            counts = write_synthetic_umls(folder, SMOKE_CONCEPTS, seed=arguments.seed, compress=arguments.gzip)
            print(" ".join(f"{key}={value:,}" for key, value in counts.items()))
            print("\n| file | rows | bytes |")
            print("|---|---|---|")
            for path in sorted(Path(folder).iterdir()):
                opener = gzip.open if path.suffix == ".gz" else open
                with opener(path, "rt", encoding="utf-8") as handle:
                    rows = sum(1 for _ in handle)
                print(f"| {path} | {rows:,} | {path.stat().st_size:,} |")
        return
    if arguments.directory is None:
        parser.error("the output directory is required (or --smoke)")
    counts = write_synthetic_umls(
        arguments.directory,
        parse_size(arguments.concepts),
        seed=arguments.seed,
        compress=arguments.gzip,
        show_progress=True,
    )
    print(" ".join(f"{key}={value:,}" for key, value in counts.items()))


if __name__ == "__main__":
    main()
