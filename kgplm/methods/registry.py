"""The method registry: one :class:`MethodSpec` per pre-training method, looked up by name.

A method is a plugin. Its record says everything the pipeline needs to know — the config and
model classes, how a batch is built, the losses it logs, the KG-side artefacts it needs, its
default masking, how its encoder runs at fine-tuning time and which extra inputs that encoder
reads there — so that :func:`kgplm.train`, :func:`kgplm.finetune`, :func:`kgplm.evaluate` and the
CLI dispatch through :func:`get` and never name a method. Adding a method means writing its own
module under :mod:`kgplm.methods` and calling :func:`register` there (and importing the module in
``kgplm/methods/__init__.py``, or anywhere before use for a third-party method).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgplm.exceptions import ConfigurationError
from kgplm.models.configuration import KgplmConfig
from kgplm.text.masking import ENTITY_SCHEMES

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.models.encoding import Encoding

__all__ = ["known_artefacts", "Ablation", "AttributionRow", "Control", "Endpoint", "DIRECTIONS", "MethodContext",
           "MethodEvaluation", "MethodSpec", "available", "get", "register", "unregister", "method_table", "claim_table"]

def known_artefacts() -> list[str]:
    """The KG-side artefacts a method can ask ``kgplm.train`` to prepare (:data:`kgplm.training.stages.STAGES`).

    Built in: ``entity_frequencies`` (mentions per entity in the corpus), ``neighbor_table`` (PEPR
    top-K of every mentioned entity, attached to the corpus), ``kg_embeddings`` (TransE or TransR,
    ``MethodSpec.kg_embedding``). Every corpus is linked (mention spans and entity ids), whatever
    the method, so whole-entity masking works for any method and its control.
    """
    from kgplm.training.stages import STAGES

    return list(STAGES)


@dataclass(frozen=True)
class Control:
    """The fair control of a method: another method run with the same data, budget and input format.

    ``method`` is the control's method name; ``masking`` and ``model_options`` are what make it
    match (e.g. plain MLM with the same whole-entity masking and SOP input).
    """

    method: str
    masking: str | None = None
    model_options: Mapping[str, Any] = field(default_factory=dict)


#: which way a primary endpoint's metric counts as better
DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class Endpoint:
    """A pre-registered primary endpoint: the paper's headline claim as one comparison kgplm can run.

    ``task``: a fine-tuning task (:func:`kgplm.evaluation.tasks.get_task`) whose ``metric`` is the
    task's own metric, or one of the method's ``evaluations`` columns (then ``metric`` names what the
    column measures). ``direction``: ``"higher"`` or ``"lower"`` is better. The comparison is always
    the method against its fair control (``MethodSpec.control``), paired by pre-training seed.
    ``claim``: what the paper reports, with where; ``approximation``: how kgplm's task differs from
    the paper's (empty when it is the paper's own dataset and metric).
    """

    task: str
    metric: str
    direction: str = "higher"
    claim: str = ""
    approximation: str = ""
    comparison: str = "method vs its control"

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ConfigurationError(f"endpoint {self.task!r}: direction must be one of {DIRECTIONS}, got "
                                     f"{self.direction!r}")
        if self.comparison != "method vs its control":
            raise ConfigurationError(f"endpoint {self.task!r}: a primary endpoint compares the method with its "
                                     f"control, got comparison {self.comparison!r}")


@dataclass(frozen=True)
class Ablation:
    """An ablation that pre-trains with another masking scheme (and optionally other ``model_options``),
    e.g. KeBioLM's −wem: whole-word instead of whole-word-and-entity masking. An ablation that only
    changes model options is a plain mapping in ``MethodSpec.ablations``."""

    masking: str | None = None
    model_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MethodEvaluation:
    """A method's own evaluation of a pre-trained model (e.g. EP-PLM's product-attribute AUC).

    ``benchmarks/replicate.py`` reports it as a column for the method, its control and its
    ablations. ``run(model_dir, method_run, *, device, progress)`` scores the pre-trained model in
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


@dataclass(frozen=True)
class AttributionRow:
    """An extra replication row that attributes a method's gain to one of its ingredients.

    A pre-training of the method (``base="method"``) or of its control (``base="control"``) with extra
    ``kgplm.train`` options (``train_options``, e.g. ``graph_shuffle_seed``), fine-tuned with extra
    ``kgplm.finetune`` options (``finetune_options``, e.g. ``mention_spans``), and compared, seed-paired,
    with the method's row or its control's (``compare_with``). ``description`` says what it isolates.
    """

    base: str
    train_options: Mapping[str, Any] = field(default_factory=dict)
    finetune_options: Mapping[str, Any] = field(default_factory=dict)
    compare_with: str = "method"
    description: str = ""

    def __post_init__(self) -> None:
        for name, value in (("base", self.base), ("compare_with", self.compare_with)):
            if value not in ("method", "control"):
                raise ConfigurationError(f"AttributionRow {name} must be 'method' or 'control', got {value!r}")


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
        control: the method's fair control (``None`` for a control itself).
        ablations: name → ``model_options`` of each ablation the method offers, or an
            :class:`Ablation` when it changes the masking (:meth:`ablation` reads either).
        evaluations: column name → :class:`MethodEvaluation`, the method's own evaluations of a
            pre-trained model (reported by ``benchmarks/replicate.py`` for the method, its
            control and its ablations).
        primary_endpoints: the paper's headline claim, pre-registered (:class:`Endpoint`); every
            other comparison of the method's family is secondary (Holm-adjusted). A knowledge
            method (one with a ``control``) must declare at least one.
        results_version: bumped by every fix that changes the method's numbers; the replication
            runner keys its caches and cells by it and refuses a table that mixes versions.
        attribution_rows: row label → :class:`AttributionRow`, extra rows of the replication table
            that separate the parts of the method's gain (e.g. SMedBERT's graph from its mention spans).
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
    control: Control | None = None
    ablations: Mapping[str, "Mapping[str, Any] | Ablation"] = field(default_factory=dict)
    evaluations: Mapping[str, MethodEvaluation] = field(default_factory=dict)
    primary_endpoints: tuple[Endpoint, ...] = ()
    results_version: int = 1
    attribution_rows: Mapping[str, AttributionRow] = field(default_factory=dict)

    def needs_graph(self, masking: str | None = None) -> bool:
        """Whether a run of this method reads a knowledge graph: it needs a KG-side artefact, or its
        masking (``masking``, default the method's own) masks linked entity mentions
        (:data:`kgplm.text.masking.ENTITY_SCHEMES`). ``kgplm.train`` requires ``graph`` exactly then,
        and runs without one otherwise."""
        return bool(self.artefacts) or (masking or self.default_masking) in ENTITY_SCHEMES

    def __post_init__(self) -> None:
        self._check_endpoints()
        unknown = set(self.artefacts) - set(known_artefacts())
        if unknown:
            raise ConfigurationError(f"method {self.name!r}: unknown artefacts {sorted(unknown)}; known: "
                                     f"{known_artefacts()} (register a stage with kgplm.training.stages.register_stage)")
        if ("kg_embeddings" in self.artefacts) != (self.kg_embedding is not None):
            raise ConfigurationError(f"method {self.name!r}: kg_embedding ({self.kg_embedding!r}) must be set exactly "
                                     f"when 'kg_embeddings' is among the artefacts")
        if any(not isinstance(evaluation, MethodEvaluation) for evaluation in self.evaluations.values()):
            raise ConfigurationError(f"method {self.name!r}: evaluations must map column names to MethodEvaluation "
                                     f"records")
        from kgplm.text.masking import SCHEMES

        bad_masking = {name: value.masking for name, value in self.ablations.items()
                       if isinstance(value, Ablation) and value.masking not in (None, *SCHEMES)}
        if bad_masking:
            raise ConfigurationError(f"method {self.name!r}: ablations {bad_masking} name unknown masking schemes; "
                                     f"known: {SCHEMES}")
        if self.kg_embedding not in (None, "transe", "transr"):
            raise ConfigurationError(f"method {self.name!r}: kg_embedding must be 'transe' or 'transr', "
                                     f"got {self.kg_embedding!r}")

    def _check_endpoints(self) -> None:
        from kgplm.evaluation.tasks import TASKS

        if not isinstance(self.results_version, int) or isinstance(self.results_version, bool) \
                or self.results_version < 1:
            raise ConfigurationError(f"method {self.name!r}: results_version must be a positive integer, got "
                                     f"{self.results_version!r}")
        if self.primary_endpoints and self.control is None:
            raise ConfigurationError(f"method {self.name!r}: primary endpoints compare a method with its control; "
                                     f"it has none")
        for endpoint in self.primary_endpoints:
            if not isinstance(endpoint, Endpoint):
                raise ConfigurationError(f"method {self.name!r}: primary_endpoints must be Endpoint records, got "
                                         f"{endpoint!r}")
            if endpoint.task in self.evaluations:
                continue
            if endpoint.task not in TASKS:
                raise ConfigurationError(f"method {self.name!r}: endpoint task {endpoint.task!r} is neither a task "
                                         f"({', '.join(sorted(TASKS))}) nor one of its evaluations "
                                         f"({', '.join(self.evaluations) or 'none'})")
            if TASKS[endpoint.task].metric != endpoint.metric:
                raise ConfigurationError(f"method {self.name!r}: endpoint {endpoint.task!r} names metric "
                                         f"{endpoint.metric!r}, but the task is scored by "
                                         f"{TASKS[endpoint.task].metric!r}")

    def needs(self, artefact: str) -> bool:
        return artefact in self.artefacts

    def ablation(self, name: str) -> Ablation:
        """The ablation ``name`` as an :class:`Ablation` (masking ``None``: the method's default)."""
        if name not in self.ablations:
            raise ConfigurationError(f"method {self.name!r} has no ablation {name!r}; it offers {sorted(self.ablations)}")
        value = self.ablations[name]
        return value if isinstance(value, Ablation) else Ablation(model_options=dict(value))


_REGISTRY: dict[str, MethodSpec] = {}


def register(spec: MethodSpec, *, replace: bool = False) -> MethodSpec:
    """Add ``spec`` under ``spec.name``; a second registration of a name fails unless ``replace``."""
    if spec.name in _REGISTRY and not replace:
        raise ConfigurationError(f"a method named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    if isinstance(spec.config_class, type) and issubclass(spec.config_class, KgplmConfig):
        from kgplm.models.auto import register_auto_classes

        register_auto_classes(spec.config_class)  # AutoModel & co. open this method's models
    return spec


def unregister(name: str) -> None:
    """Remove a method (for tests and third-party plugins that replace one)."""
    _REGISTRY.pop(name, None)


def available() -> list[str]:
    """The registered method names, in registration order."""
    return list(_REGISTRY)


def get(name: str) -> MethodSpec:
    """The record of method ``name``; an unknown name raises :class:`ConfigurationError` listing the known ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ConfigurationError(f"unknown method {name!r}; available methods: {', '.join(available())}") from None


def method_table() -> str:
    """The registered methods as a Markdown table (the README's table is checked against it)."""
    lines = ["| method | losses logged | KG artefacts | default masking | fair control |",
             "|---|---|---|---|---|"]
    for name in available():
        spec = get(name)
        artefacts = ", ".join(
            f"{artefact} ({spec.kg_embedding})" if artefact == "kg_embeddings" else artefact
            for artefact in sorted(spec.artefacts)) or "none"
        control = "—" if spec.control is None else (
            f"`{spec.control.method}`" + (f", masking {spec.control.masking}" if spec.control.masking else "")
            + "".join(f", {key}={value}" for key, value in spec.control.model_options.items()))
        lines.append(f"| `{name}` | {', '.join(spec.losses)} | {artefacts} | {spec.default_masking} | {control} |")
    return "\n".join(lines)


def claim_table() -> str:
    """The pre-registered primary endpoints of every knowledge method as a Markdown table (the README's
    "Does the knowledge help?" claim table is checked against it)."""
    lines = ["| method | primary endpoint (vs its fair control) | better | the paper's claim | how kgplm's task differs |",
             "|---|---|---|---|---|"]
    for name in available():
        spec = get(name)
        for endpoint in spec.primary_endpoints:
            differs = endpoint.approximation or "the paper's dataset and metric"
            lines.append(f"| `{name}` | {endpoint.task} {endpoint.metric} | {endpoint.direction} | {endpoint.claim} | "
                         f"{differs} |")
    return "\n".join(lines)
