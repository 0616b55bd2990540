"""Shared fixtures: paths to the real data in ../shared/data and small graphs built in code."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

_SESSION_TEMP: Path | None = None


def pytest_configure(config) -> None:
    """Everything the tests and the libraries they call write to the system temp folder outside
    ``tmp_path`` (subprocesses, PyG's generated modules, ``tempfile`` users) goes to one folder that is
    removed when the run ends; pytest's own ``tmp_path`` folders stay where pytest keeps them (and
    ``tmp_path_retention_policy`` keeps only those of failed tests)."""
    global _SESSION_TEMP
    if _SESSION_TEMP is not None:
        return
    _share_cores_among_workers()
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    _SESSION_TEMP = Path(tempfile.mkdtemp(prefix="kgplm-tests-"))
    os.environ["TMPDIR"] = str(_SESSION_TEMP)
    tempfile.tempdir = str(_SESSION_TEMP)
    # the KG artefact cache of kgplm.train: never the user's own (each test gets its own below)
    os.environ["KGPLM_CACHE"] = str(_SESSION_TEMP / "kgplm-cache")


def _share_cores_among_workers() -> None:
    """In a pytest-xdist worker (``make test`` runs one per core), torch, numba and the subprocesses the tests
    start use this worker's share of the cores (unless ``OMP_NUM_THREADS`` says otherwise): two workers of
    two threads each on two cores wait on each other's threads and run several times slower. Runs before
    torch or numba is imported, which read these variables when they load."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers <= 1 or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    share = str(max(1, cores // workers))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[name] = share


@pytest.fixture(autouse=True)
def _own_artefact_cache(monkeypatch, request) -> None:
    """Each test's ``kgplm.train`` calls share a cache of their own (module fixtures share the session's)."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.nodeid)[-150:]
    monkeypatch.setenv("KGPLM_CACHE", str(_SESSION_TEMP / "kgplm-cache-per-test" / name))


def pytest_unconfigure(config) -> None:
    global _SESSION_TEMP
    if _SESSION_TEMP is not None:
        shutil.rmtree(_SESSION_TEMP, ignore_errors=True)
        _SESSION_TEMP = None


def shared_data_dir() -> Path:
    return Path(os.environ.get("KGPLM_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"real data not found at {path} (set KGPLM_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def cmekg_tsv(shared_data: Path) -> Path:
    path = shared_data / "kg" / "cmekg" / "triples.tsv.gz"
    if not path.is_file():
        pytest.skip(f"CMeKG dump not found at {path}")
    return path


@pytest.fixture(scope="session")
def cmekg_store(cmekg_tsv: Path):
    from kgplm import KGStore

    return KGStore.from_cmekg(cmekg_tsv, show_progress=False)


TOY_TURTLE = """\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix oboInOwl: <http://www.geneontology.org/formats/oboInOwl#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .

ex:diabetes a ex:Disease ;
    rdfs:label "糖尿病"@zh, "diabetes"@en ;
    skos:altLabel "消渴"@zh ;
    oboInOwl:hasExactSynonym "diabetes mellitus"@en ;
    ex:icd10 "E14" ;
    ex:prevalence "0.11"^^xsd:decimal ;
    ex:hasSymptom ex:polyuria, ex:thirst .
ex:polyuria a ex:Symptom ; rdfs:label "多尿"@zh .
ex:thirst a ex:Symptom ; skos:prefLabel "口渴"@zh ; rdfs:label "烦渴"@zh .
ex:metformin a ex:Drug ; rdfs:label "二甲双胍"@zh, "metformin"@en ;
    ex:treats ex:diabetes ; owl:sameAs ex:glucophage .
ex:glucophage rdfs:label "格华止"@zh .
ex:lonely a ex:Symptom .
ex:hasSymptom rdfs:label "常见症状"@zh .
ex:Disease rdfs:label "疾病"@zh .
ex:treats a owl:ObjectProperty ; rdfs:domain ex:Drug ; rdfs:label "治疗"@zh .
"""


@pytest.fixture()
def toy_turtle(tmp_path: Path) -> Path:
    path = tmp_path / "toy.ttl"
    path.write_text(TOY_TURTLE, encoding="utf-8")
    return path
