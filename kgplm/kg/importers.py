"""Knowledge-graph importers, registered by format as rdflib registers its parser plugins.

Each importer is a function ``load(source, **options) -> KGStore`` under a format name. The built-in
ones are registered here by ``"module:function"`` strings and imported on first use, so that this
module, :mod:`kgplm.kg.store` and the importers do not import each other. Each format, and what
:func:`open_store` recognises as that format when none is named:

* ``store`` — a directory written by :meth:`KGStore.save` (recognised by its ``manifest.json``);
* ``rdf`` — Turtle, N-Triples, N-Quads, TriG, RDF/XML, JSON-LD, N3 (``.ttl .nt .nq .trig .rdf .xml
  .owl .jsonld .json .n3``, each optionally ``.gz``);
* ``triples`` (alias ``tsv``) — head–relation–tail TSV/CSV (``.tsv .csv .txt``);
* ``cmekg`` — the CMeKG dump: ``"cmekg"`` (the ``pycmekg`` package) or a table file whose name or
  folder says ``cmekg``;
* ``obo`` — OBO 1.4 ontologies (``.obo``);
* ``umls_rrf`` (alias ``umls``) — a directory of UMLS RRF files (recognised by ``MRCONSO.RRF``);
* ``sparql`` — a SPARQL 1.1 endpoint (an ``http://`` or ``https://`` URL).

Third-party importers register the same way, in code (:func:`register`) or through the entry-point
group ``kgplm.kg_importers`` (the entry point's value is the ``"module:function"`` loader; it is
imported only when its format is used)::

    from kgplm.kg import importers
    importers.register("gexf", my_read_gexf, suffixes=(".gexf",))
    store = kgplm.kg.open_store("graph.gexf")          # or open_store(path, format="gexf")

When :func:`open_store` guesses, the importers' ``detect`` functions are asked first, then file
suffixes are matched; within each step the most recently registered importer wins, so a plugin can
take over a suffix from a built-in one.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgplm.exceptions import ConfigurationError, MissingFileError
from kgplm.kg.rdf_formats import EXTENSION_FORMATS

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["Importer", "register", "unregister", "get", "available", "guess", "ENTRY_POINT_GROUP"]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kgplm.kg_importers"


@dataclass
class Importer:
    """One registered importer.

    ``loader`` is the function or a ``"module:attribute"`` string imported on first use.
    ``suffixes`` are the file suffixes it claims (lower case, ``.gz`` excluded); ``detect(spec)``
    may claim a source by other signs (a URL, a directory's content, a name); ``sources`` says
    whether it reads a ``"file"``, a ``"directory"``, a ``"url"`` or ``"any"`` source.
    """

    name: str
    loader: Callable[..., "KGStore"] | str
    description: str = ""
    suffixes: tuple[str, ...] = ()
    detect: Callable[[str], bool] | None = None
    aliases: tuple[str, ...] = ()
    sources: str = "file"
    _function: Callable[..., "KGStore"] | None = field(default=None, compare=False, repr=False)

    def function(self) -> Callable[..., "KGStore"]:
        """The loader function (imported on first call when registered as a string)."""
        if self._function is None:
            loader = self.loader
            if isinstance(loader, str):
                module_name, _, attribute = loader.partition(":")
                try:
                    loader = importlib.import_module(module_name)
                    for part in attribute.split("."):
                        loader = getattr(loader, part)
                except (ImportError, AttributeError) as error:
                    raise ConfigurationError(
                        f"the {self.name!r} importer {self.loader!r} cannot be imported: {error}"
                    ) from None
            self._function = loader
        return self._function

    def load(self, source: Any, *, show_progress: bool = True, **options) -> "KGStore":
        """Run the importer on ``source``; ``show_progress`` is passed when the loader accepts it."""
        function = self.function()
        if _accepts(function, "show_progress"):
            options["show_progress"] = show_progress
        store = function(source, **options)
        logger.info("%s importer loaded %r", self.name, store)
        return store


def _accepts(function: Callable, name: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


_registry: dict[str, Importer] = {}
_aliases: dict[str, str] = {}
_entry_points_loaded = False


def register(
    name: str,
    loader: Callable[..., "KGStore"] | str,
    *,
    suffixes: Iterable[str] = (),
    detect: Callable[[str], bool] | None = None,
    description: str = "",
    aliases: Iterable[str] = (),
    sources: str = "file",
    replace: bool = False,
) -> Importer:
    """Register ``loader`` as the importer of format ``name`` (and of its ``aliases``).

    Registering a taken name raises :class:`ConfigurationError` unless ``replace=True``.
    """
    if not name or not isinstance(name, str):
        raise ConfigurationError(f"an importer needs a non-empty format name, got {name!r}")
    if sources not in ("file", "directory", "url", "any"):
        raise ConfigurationError(f"sources must be 'file', 'directory', 'url' or 'any', got {sources!r}")
    key = name.lower()
    aliases = tuple(a.lower() for a in aliases)
    for taken in (key, *aliases):
        owner = taken if taken in _registry else _aliases.get(taken)
        if owner is not None and not replace:
            raise ConfigurationError(
                f"the format {taken!r} is already registered (by the {owner!r} importer); "
                "pass replace=True to override it"
            )
    if replace:
        unregister(key, missing_ok=True)
    importer = Importer(key, loader, description, tuple(s.lower() for s in suffixes), detect, aliases, sources)
    _registry[key] = importer
    for alias in aliases:
        _aliases[alias] = key
    return importer


def unregister(name: str, *, missing_ok: bool = False) -> None:
    """Remove the importer of ``name`` (and its aliases)."""
    key = _aliases.get(name.lower(), name.lower())
    importer = _registry.pop(key, None)
    if importer is None:
        if not missing_ok:
            raise ConfigurationError(f"no importer is registered for {name!r}")
        return
    for alias in importer.aliases:
        _aliases.pop(alias, None)


def _load_entry_points() -> None:
    """Register the importers that installed packages declare in the ``kgplm.kg_importers`` group."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name.lower() in _registry or entry_point.name.lower() in _aliases:
            logger.warning(
                "entry point %s ignored: the format %r is already registered", entry_point.value, entry_point.name
            )
            continue
        register(entry_point.name, entry_point.value, description=f"from the entry point {entry_point.value}")


def available(*, aliases: bool = False) -> list[str]:
    """Registered format names in registration order (with their aliases when ``aliases``)."""
    _load_entry_points()
    names = list(_registry)
    return names + list(_aliases) if aliases else names


def get(name: str) -> Importer:
    """The importer of format ``name``; an unknown name raises :class:`ConfigurationError` listing the known ones."""
    _load_entry_points()
    key = str(name).lower()
    key = _aliases.get(key, key)
    if key not in _registry:
        known = ", ".join(f"{n} ({', '.join(i.aliases)})" if i.aliases else n for n, i in _registry.items())
        raise ConfigurationError(f"no knowledge-graph importer for the format {name!r}; known formats: {known}")
    return _registry[key]


def _file_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    return suffixes[-1] if suffixes else ""


def guess(spec: str | os.PathLike) -> Importer:
    """The importer for ``spec`` (a path, a URL or a name): ``detect`` first, then the file suffix."""
    _load_entry_points()
    candidates = list(reversed(_registry.values()))
    if isinstance(spec, (list, tuple)) and spec:  # several files of one format: the first one decides
        spec = spec[0]
    text = os.fspath(spec)
    for importer in candidates:
        if importer.detect is not None and importer.detect(text):
            return importer
    path = Path(text)
    if path.is_dir():
        raise ConfigurationError(
            f"no importer recognises the directory {path} (a saved store has manifest.json, UMLS has MRCONSO.RRF); "
            f"pass format= (one of {', '.join(_registry)})"
        )
    if not path.is_file():
        raise MissingFileError(path, "knowledge graph")
    suffix = _file_suffix(path)
    for importer in candidates:
        if suffix and suffix in importer.suffixes:
            return importer
    claimed = sorted({s for importer in candidates for s in importer.suffixes})
    raise ConfigurationError(
        f"cannot tell the knowledge-graph format of {path} from its suffix {suffix!r}; known suffixes: "
        f"{' '.join(claimed)}; or pass format= (one of {', '.join(_registry)})"
    )


# -- the built-in importers -----------------------------------------------------------------------
def _is_url(spec: str) -> bool:
    return spec.startswith(("http://", "https://"))


def _is_saved_store(spec: str) -> bool:
    return not _is_url(spec) and (Path(spec) / "manifest.json").is_file()


def _is_umls_directory(spec: str) -> bool:
    directory = Path(spec)
    return (
        not _is_url(spec)
        and directory.is_dir()
        and any((directory / name).is_file() for name in ("MRCONSO.RRF", "MRCONSO.RRF.gz", "mrconso.rrf"))
    )


def _is_cmekg(spec: str) -> bool:
    if spec.lower() == "cmekg":
        return True
    path = Path(spec)
    return (
        not _is_url(spec)
        and path.is_file()
        and _file_suffix(path) in (".tsv", ".csv", ".txt")
        and ("cmekg" in path.name.lower() or "cmekg" in str(path.parent).lower())
    )


register(
    "store",
    "kgplm.kg.store:KGStore.load",
    detect=_is_saved_store,
    sources="directory",
    description="a directory written by KGStore.save (memory-mapped)",
)
register(
    "rdf",
    "kgplm.kg.rdf:read_rdf",
    suffixes=tuple(EXTENSION_FORMATS),
    description="RDF files: Turtle, N-Triples, N-Quads, TriG, RDF/XML, JSON-LD, N3",
)
register(
    "triples",
    "kgplm.kg.tabular:read_triples",
    suffixes=(".tsv", ".csv", ".txt"),
    aliases=("tsv",),
    description="head-relation-tail tables (TSV/CSV, OpenKE, PyKEEN)",
)
register(
    "cmekg",
    "kgplm.kg.cmekg:read_cmekg",
    detect=_is_cmekg,
    sources="any",
    description="CMeKG: a subject-predicate-object TSV, or the pycmekg package for 'cmekg'",
)
register("obo", "kgplm.kg.obo:read_obo", suffixes=(".obo",), description="OBO 1.4 ontologies (HPO, DO, ...)")
register(
    "umls_rrf",
    "kgplm.kg.umls:read_umls_rrf",
    detect=_is_umls_directory,
    aliases=("umls",),
    sources="directory",
    description="UMLS Metathesaurus RRF files (MRCONSO, MRREL, MRSTY)",
)
register(
    "sparql",
    "kgplm.kg.sparql:read_sparql",
    detect=_is_url,
    sources="url",
    description="a SPARQL 1.1 endpoint (paged SELECT, or a CONSTRUCT query)",
)
