"""Knowledge graphs: the :class:`KGStore` and its importers and exporters."""

from kgplm.kg.store import GraphCollector, KGStore

__all__ = ["KGStore", "GraphCollector", "open_store"]


def open_store(spec, *, show_progress: bool = True) -> KGStore:
    """A store from a loose description, as the CLI and ``kgplm.train(graph=...)`` accept it.

    ``spec`` may be a :class:`KGStore`; ``"cmekg"`` (the embedded default from the ``pycmekg``
    package); a directory written by :meth:`KGStore.save`; a directory of UMLS RRF files; or a
    file: ``.obo`` → OBO, ``.tsv``/``.csv``/``.txt`` (optionally ``.gz``) → triples table (a CMeKG
    dump, whose name contains ``cmekg``, → CMeKG rules), anything else → RDF.
    """
    from pathlib import Path

    from kgplm.exceptions import MissingFileError

    if isinstance(spec, KGStore):
        return spec
    if str(spec).lower() == "cmekg":
        return KGStore.from_cmekg(None, show_progress=show_progress)
    path = Path(spec)
    if path.is_dir():
        if (path / "manifest.json").is_file():
            return KGStore.load(path)
        return KGStore.from_umls_rrf(path, show_progress=show_progress)
    if not path.is_file():
        raise MissingFileError(path, "knowledge graph")
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    last = suffixes[-1] if suffixes else ""
    if last == ".obo":
        return KGStore.from_obo(path, show_progress=show_progress)
    if last in (".tsv", ".csv", ".txt"):
        if "cmekg" in path.name.lower() or "cmekg" in str(path.parent).lower():
            return KGStore.from_cmekg(path, show_progress=show_progress)
        return KGStore.from_triples(path, show_progress=show_progress)
    return KGStore.from_rdf(path, show_progress=show_progress)
