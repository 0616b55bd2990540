"""The method registry: one :class:`MethodSpec` per pre-training method, looked up by name.

A method is a plugin. Its record says everything the pipeline needs to know — the config and
model classes, how a batch is built, the losses it logs, the KG-side artefacts it needs, its
default masking, how its encoder runs at fine-tuning time and which extra inputs that encoder
reads there — so that :func:`kgplm.train`, :func:`kgplm.finetune`, :func:`kgplm.evaluate`, the
models, the training loop and the CLI dispatch through :func:`get` and never name a method.

This module sits below :mod:`kgplm.models` and :mod:`kgplm.training`: they look methods up here
without importing :mod:`kgplm.methods`. The built-in methods are loaded on the first lookup (by
importing :mod:`kgplm.methods`, where each registers itself with
:func:`kgplm.methods.register`), and so are the methods that installed packages declare in the
entry-point group ``kgplm.methods`` (:data:`ENTRY_POINT_GROUP`; the entry point names a module
that registers its methods when imported, or a function that returns a :class:`MethodSpec`).
The KG-side artefacts a record may ask for are the names :mod:`kgplm.training.stages` registers
with :func:`register_artefact`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgplm.exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.models.encoding import Encoding

__all__ = [
    "ENTRY_POINT_GROUP",
    "method_plugins_installed",
    "known_artefacts",
    "register_artefact",
    "MethodContext",
    "MethodEvaluation",
    "MethodSpec",
    "available",
    "get",
    "register",
    "unregister",
    "method_table",
]

logger = logging.getLogger(__name__)

#: the entry-point group through which installed packages add methods
ENTRY_POINT_GROUP = "kgplm.methods"
#: the package whose import registers the built-in methods
BUILT_IN_PACKAGE = "kgplm.methods"

_ARTEFACTS: dict[str, None] = {}  # ordered set of the artefact names a stage produces


def register_artefact(name: str) -> None:
    """Declare that a stage produces the KG-side artefact ``name`` (:func:`kgplm.training.stages.register_stage`
    calls it), so that a :class:`MethodSpec` may ask for it."""
    _ARTEFACTS[name] = None


def known_artefacts() -> list[str]:
    """The KG-side artefacts a method can ask ``kgplm.train`` to prepare (:data:`kgplm.training.stages.STAGES`).

    Built in: ``entity_frequencies`` (mentions per entity in the corpus), ``neighbor_table`` (PEPR
    top-K of every mentioned entity, attached to the corpus), ``kg_embeddings`` (TransE or TransR,
    ``MethodSpec.kg_embedding``). Every corpus is linked (mention spans and entity ids), whatever
    the method, so whole-entity masking works for any method and its control.
    """
    _load_plugins()
    return list(_ARTEFACTS)


@dataclass(frozen=True)
class MethodEvaluation:
    """A method's own evaluation of a pre-trained model (e.g. EP-PLM's product-attribute AUC).

    A study reports it as a column for the method, its controls and its ablations. ``run(model_dir, method_run, *, device, progress)`` scores the pre-trained model in
    ``model_dir`` — the method's, or its control's or an ablation's, so it must accept any method's
    model — with the data of the method's own pre-training run ``method_run`` (a
    :class:`~kgplm.training.run.RunDirectory`: its graph, artefacts and ``method_data`` in
    ``run_config.json``) and returns a score in [0, 1]. ``chance``: what a model that knows nothing
    scores (0.5 for an AUC), printed as the baseline; ``description``: the column's meaning.

    An evaluation on held-out knowledge also says how the pre-training data must leave it out:
    ``method_data``, the ``kgplm.train(method_data=...)`` entries the method's own runs (the
    method and its ablations) need, and ``filter_text(store, lines) -> lines``, which drops the
    pre-training text lines that would reveal the held-out facts (applied to the text of every row,
    so that the method and its control read the same text).
    """

    run: Callable[..., float]
    chance: float | None = None
    description: str = ""
    method_data: Mapping[str, Any] = field(default_factory=dict)
    filter_text: Callable[[Any, list[str]], list[str]] | None = None


@dataclass
class MethodContext:
    """What ``kgplm.train`` hands a method's ``build_collator`` and ``prepare_model``.

    ``artefacts`` holds what the method's stages produced, by artefact name (the standard ones are
    also properties: absent ones are ``None``); ``text_model_dir`` is the checkpoint the
    encoder started from: a BERT checkpoint (``text_model``) or a kgplm model (``init_from``);
    ``None`` for an encoder trained from scratch.
    """

    config: Any
    tokenizer: Any
    store: Any
    masking: str
    seed: int
    text_model_dir: Any = None
    artefacts: dict[str, Any] = field(default_factory=dict)

    @property
    def entity_frequencies(self):
        return self.artefacts.get("entity_frequencies")

    @property
    def neighbor_table(self):
        return self.artefacts.get("neighbor_table")

    @property
    def kg_embeddings(self):
        return self.artefacts.get("kg_embeddings")


@dataclass(frozen=True)
class MethodSpec:
    """Everything the pipeline knows about one pre-training method.

    Attributes:
        name: the registry key (``kgplm.train(method=name)``).
        summary: one line for ``kgplm methods``.
        paper: the citation.
        config_class: a :class:`~kgplm.models.KgplmConfig` subclass holding the method's own fields.
        model_class: the pre-training model (a ``PreTrainedModel`` whose output has ``losses``).
        encoding: how the encoder runs, at pre-training and at fine-tuning
            (:class:`~kgplm.models.encoding.Encoding`); builds the encoder modules on a host model.
        build_collator: ``(context) -> collator``, the batch builder (see :class:`MethodContext`).
        losses: the short names of the losses it logs (``output.losses`` keys).
        artefacts: the KG-side artefacts it needs (:func:`known_artefacts`).
        kg_embedding: ``"transe"`` or ``"transr"`` when it needs ``kg_embeddings``.
        default_masking: a :data:`kgplm.text.masking.SCHEMES` name.
        finetuning_inputs: ``(run_directory, progress) -> provider`` of extra per-example
            inputs at fine-tuning (e.g. SMedBERT's linked mentions and neighbours), or ``None``.
        derive_config: ``(artefacts) -> dict`` of config fields the method takes from its
            artefacts (e.g. SMedBERT's ``neighbor_candidates`` from the PEPR table), or ``None``.
        prepare_model: ``(model, context) -> None`` run once on a fresh model before
            pre-training (load KG tables, snapshot frozen targets …), or ``None``.
        evaluations: column name → :class:`MethodEvaluation`, the method's own evaluations of a
            pre-trained model (any method's model: a study scores the method and its controls alike).
    """

    name: str
    summary: str
    paper: str
    config_class: type
    model_class: type
    encoding: "Encoding"
    build_collator: Callable[[Any], Any]
    losses: tuple[str, ...]
    artefacts: frozenset[str] = frozenset()
    kg_embedding: str | None = None
    default_masking: str = "bert"
    finetuning_inputs: Callable[..., Any] | None = None
    derive_config: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    prepare_model: Callable[[Any, Any], None] | None = None
    evaluations: Mapping[str, MethodEvaluation] = field(default_factory=dict)

    def needs_graph(self, masking: str | None = None) -> bool:
        """Whether a run of this method reads a knowledge graph: it needs a KG-side artefact, or its
        masking (``masking``, default the method's own) masks linked entity mentions
        (:data:`kgplm.text.masking.ENTITY_SCHEMES`). ``kgplm.train`` requires ``graph`` exactly then,
        and runs without one otherwise."""
        from kgplm.text.masking import ENTITY_SCHEMES  # the text layer loads torch: not before it is needed

        return bool(self.artefacts) or (masking or self.default_masking) in ENTITY_SCHEMES

    def __post_init__(self) -> None:
        unknown = set(self.artefacts) - set(_ARTEFACTS)
        if unknown:  # a record made before the built-in stages were loaded
            unknown -= set(known_artefacts())
        if unknown:
            raise ConfigurationError(
                f"method {self.name!r}: unknown artefacts {sorted(unknown)}; known: "
                f"{known_artefacts()} (register a stage with kgplm.training.stages.register_stage)"
            )
        if ("kg_embeddings" in self.artefacts) != (self.kg_embedding is not None):
            raise ConfigurationError(
                f"method {self.name!r}: kg_embedding ({self.kg_embedding!r}) must be set exactly "
                f"when 'kg_embeddings' is among the artefacts"
            )
        if any(not isinstance(evaluation, MethodEvaluation) for evaluation in self.evaluations.values()):
            raise ConfigurationError(
                f"method {self.name!r}: evaluations must map column names to MethodEvaluation records"
            )
        if self.kg_embedding not in (None, "transe", "transr"):
            raise ConfigurationError(
                f"method {self.name!r}: kg_embedding must be 'transe' or 'transr', got {self.kg_embedding!r}"
            )

    def needs(self, artefact: str) -> bool:
        return artefact in self.artefacts


_REGISTRY: dict[str, MethodSpec] = {}
_plugins_loaded = False


def _load_plugins() -> None:
    """Import the built-in methods and the ``kgplm.methods`` entry points, once (they register themselves)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    importlib.import_module(BUILT_IN_PACKAGE)
    from importlib.metadata import entry_points

    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry_point.load()
        except Exception as error:  # a broken third-party package must not stop kgplm
            logger.warning(
                "the method entry point %s = %s could not be loaded: %s", entry_point.name, entry_point.value, error
            )
            continue
        if callable(loaded) and not isinstance(loaded, type):
            spec = loaded()
            if isinstance(spec, MethodSpec) and spec.name not in _REGISTRY:
                importlib.import_module(BUILT_IN_PACKAGE).register(spec)  # with its Auto classes


def method_plugins_installed() -> bool:
    """Whether an installed package declares methods in the :data:`ENTRY_POINT_GROUP` (read from the package
    metadata, nothing imported)."""
    from importlib.metadata import entry_points

    return bool(entry_points(group=ENTRY_POINT_GROUP))


def register(spec: MethodSpec, *, replace: bool = False) -> MethodSpec:
    """Add ``spec`` under ``spec.name``; a second registration of a name fails unless ``replace``.

    Methods register through :func:`kgplm.methods.register`, which also makes the Hugging Face Auto
    classes open their models; this is the bare table entry."""
    if spec.name in _REGISTRY and not replace:
        raise ConfigurationError(f"a method named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a method (for tests and third-party plugins that replace one)."""
    _REGISTRY.pop(name, None)


def available() -> list[str]:
    """The registered method names, in registration order."""
    _load_plugins()
    return list(_REGISTRY)


def get(name: str) -> MethodSpec:
    """The record of method ``name``; an unknown name raises :class:`ConfigurationError` listing the known ones."""
    if not (isinstance(name, str) and name in _REGISTRY):
        _load_plugins()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigurationError(f"unknown method {name!r}; available methods: {', '.join(available())}") from None


def method_table() -> str:
    """The registered methods as a Markdown table (the README's table is checked against it)."""
    lines = ["| method | losses logged | KG artefacts | default masking |", "|---|---|---|---|"]
    for name in available():
        spec = get(name)
        artefacts = (
            ", ".join(
                f"{artefact} ({spec.kg_embedding})" if artefact == "kg_embeddings" else artefact
                for artefact in sorted(spec.artefacts)
            )
            or "none"
        )
        lines.append(f"| `{name}` | {', '.join(spec.losses)} | {artefacts} | {spec.default_masking} |")
    return "\n".join(lines)
