"""The study spec: what the replication study ("does the knowledge help?") runs for each method.

A method's record in :mod:`kgplm.methods` says what the method *is*; its record here says how the
study tests it: its fair control (:class:`Control`), its ablations (:class:`Ablation` or a plain
mapping of ``model_options``), its pre-registered primary endpoints (:class:`Endpoint`), the rows that attribute its gain (:class:`AttributionRow`) and its results
version, which the runner keys its caches and cells by. :func:`study` looks a method's record up
by name; the study refers to methods only by name, and kgplm never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgplm.exceptions import ConfigurationError

__all__ = [
    "DIRECTIONS",
    "SMEDBERT",
    "KEBIOLM",
    "EMBERT",
    "EHEALTH",
    "EPPLM",
    "Ablation",
    "AttributionRow",
    "Control",
    "Endpoint",
    "MethodStudy",
    "STUDIES",
    "claim_table",
    "studied",
    "study",
]

#: which way a primary endpoint's metric counts as better
DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class Control:
    """The fair control of a method: another method run with the same data, budget and input format.

    ``method`` is the control's method name; ``masking`` and ``model_options`` are what make it
    match (e.g. plain MLM with the same whole-entity masking and SOP input).
    """

    method: str
    masking: str | None = None
    model_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Endpoint:
    """A pre-registered primary endpoint: the paper's headline claim as one comparison the study can run.

    ``task``: a fine-tuning task (:func:`kgplm.evaluation.tasks.get_task`) whose ``metric`` is the
    task's own metric, or one of the method's ``evaluations`` columns (then ``metric`` names what the
    column measures). ``direction``: ``"higher"`` or ``"lower"`` is better. The comparison is always
    the method against its fair control (:attr:`MethodStudy.control`), paired by pre-training seed.
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
            raise ConfigurationError(
                f"endpoint {self.task!r}: direction must be one of {DIRECTIONS}, got {self.direction!r}"
            )
        if self.comparison != "method vs its control":
            raise ConfigurationError(
                f"endpoint {self.task!r}: a primary endpoint compares the method with its "
                f"control, got comparison {self.comparison!r}"
            )


@dataclass(frozen=True)
class Ablation:
    """An ablation that pre-trains with another masking scheme (and optionally other ``model_options``),
    e.g. KeBioLM's −wem: whole-word instead of whole-word-and-entity masking. An ablation that only
    changes model options is a plain mapping in :attr:`MethodStudy.ablations`."""

    masking: str | None = None
    model_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AttributionRow:
    """An extra row of the table that attributes a method's gain to one of its ingredients.

    A pre-training of the method (``base="method"``) or of its control (``base="control"``) with extra
    ``model_options`` (the base's config fields, e.g. KeBioLM's ``entity_fusion``; they join the base's own
    ``model_options``) and extra options (``train_options``: ``kgplm.train`` arguments, or
    ``graph_shuffle_seed`` with ``graph_shuffle``, which the runner turns into ``knowledge_graph=`` a
    shuffled copy of the graph, :mod:`graph_controls`), fine-tuned with extra ``kgplm.finetune`` options
    (``finetune_options``, e.g. ``mention_spans``), and compared, seed-paired, with the method's row or
    its control's (``compare_with``). ``description`` says what it isolates.
    """

    base: str
    model_options: Mapping[str, Any] = field(default_factory=dict)
    train_options: Mapping[str, Any] = field(default_factory=dict)
    finetune_options: Mapping[str, Any] = field(default_factory=dict)
    compare_with: str = "method"
    description: str = ""

    def __post_init__(self) -> None:
        for name, value in (("base", self.base), ("compare_with", self.compare_with)):
            if value not in ("method", "control"):
                raise ConfigurationError(f"AttributionRow {name} must be 'method' or 'control', got {value!r}")


@dataclass(frozen=True)
class MethodStudy:
    """How the study tests one registered method.

    Attributes:
        method: the method's registry name.
        results_version: bumped by every fix that changes the method's numbers; the runner keys its
            caches and cells by it and refuses a table that mixes versions.
        control: the method's fair control (``None`` for a control itself).
        ablations: name → ``model_options`` of each ablation, or an :class:`Ablation` when it changes
            the masking (:meth:`ablation` reads either).
        primary_endpoints: the paper's headline claim, pre-registered; every other comparison of the
            method's family is secondary (Holm-adjusted). A knowledge method (one with a ``control``)
            declares at least one.
        attribution_rows: row label → :class:`AttributionRow`.
    """

    method: str
    results_version: int
    control: Control | None = None
    ablations: Mapping[str, Mapping[str, Any] | Ablation] = field(default_factory=dict)
    primary_endpoints: tuple[Endpoint, ...] = ()
    attribution_rows: Mapping[str, AttributionRow] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (
            not isinstance(self.results_version, int)
            or isinstance(self.results_version, bool)
            or self.results_version < 1
        ):
            raise ConfigurationError(
                f"method {self.method!r}: results_version must be a positive integer, got {self.results_version!r}"
            )
        if self.primary_endpoints and self.control is None:
            raise ConfigurationError(
                f"method {self.method!r}: primary endpoints compare a method with its control; it has none"
            )
        from kgplm.text.masking import SCHEMES

        bad_masking = {
            name: value.masking
            for name, value in self.ablations.items()
            if isinstance(value, Ablation) and value.masking not in (None, *SCHEMES)
        }
        if bad_masking:
            raise ConfigurationError(
                f"method {self.method!r}: ablations {bad_masking} name unknown masking schemes; known: {SCHEMES}"
            )
        self.check_endpoints()

    def check_endpoints(self) -> None:
        """Every endpoint names a task scored by its metric, or one of the method's own evaluations."""
        from kgplm.evaluation.tasks import TASKS
        from kgplm.methods import get

        evaluations = get(self.method).evaluations
        for endpoint in self.primary_endpoints:
            if not isinstance(endpoint, Endpoint):
                raise ConfigurationError(
                    f"method {self.method!r}: primary_endpoints must be Endpoint records, got {endpoint!r}"
                )
            if endpoint.task in evaluations:
                continue
            if endpoint.task not in TASKS:
                raise ConfigurationError(
                    f"method {self.method!r}: endpoint task {endpoint.task!r} is neither a task "
                    f"({', '.join(sorted(TASKS))}) nor one of its evaluations "
                    f"({', '.join(evaluations) or 'none'})"
                )
            if TASKS[endpoint.task].metric != endpoint.metric:
                raise ConfigurationError(
                    f"method {self.method!r}: endpoint {endpoint.task!r} names metric "
                    f"{endpoint.metric!r}, but the task is scored by "
                    f"{TASKS[endpoint.task].metric!r}"
                )

    def ablation(self, name: str) -> Ablation:
        """The ablation ``name`` as an :class:`Ablation` (masking ``None``: the method's default)."""
        if name not in self.ablations:
            raise ConfigurationError(
                f"method {self.method!r} has no ablation {name!r}; it offers {sorted(self.ablations)}"
            )
        value = self.ablations[name]
        return value if isinstance(value, Ablation) else Ablation(model_options=dict(value))


#: The study's record of every method it runs, in the registry's order.
STUDIES: dict[str, MethodStudy] = {}


def add(record: MethodStudy, *, replace: bool = False) -> MethodStudy:
    """Add ``record`` under its method's name (tests add records for methods they register)."""
    if record.method in STUDIES and not replace:
        raise ConfigurationError(f"the study already has a record for {record.method!r}")
    STUDIES[record.method] = record
    return record


def remove(method: str) -> None:
    """Drop ``method``'s record (for tests that register a method of their own)."""
    STUDIES.pop(method, None)


def study(method: str) -> MethodStudy:
    """The study's record of ``method``; a method the study has no record of raises
    :class:`~kgplm.exceptions.ConfigurationError` listing those it has."""
    try:
        return STUDIES[method]
    except (KeyError, TypeError):
        raise ConfigurationError(
            f"the study has no record of method {method!r}; it has: {', '.join(STUDIES)}"
        ) from None


def studied() -> list[str]:
    """The registered methods the study has a record of, in registry order."""
    from kgplm.methods import available

    return [name for name in available() if name in STUDIES]


def claim_table() -> str:
    """The pre-registered primary endpoints of every knowledge method as a Markdown table."""
    lines = [
        "| method | primary endpoint (vs its fair control) | better | the paper's claim | how kgplm's task differs |",
        "|---|---|---|---|---|",
    ]
    for name in studied():
        for endpoint in study(name).primary_endpoints:
            differs = endpoint.approximation or "the paper's dataset and metric"
            lines.append(
                f"| `{name}` | {endpoint.task} {endpoint.metric} | {endpoint.direction} | {endpoint.claim} | "
                f"{differs} |"
            )
    return "\n".join(lines)


# -- the pre-registered primary endpoints --------------------------------------------------------------------
# Each paper's headline claim, mapped onto the tasks kgplm can score with labelled test data and the
# replication runner's count metrics (:mod:`kgplm.evaluation.statistics`: entity F1, accuracy,
# macro-F1). Changing an endpoint after seeing a table turns the primary test into a secondary one;
# :func:`claim_table` shows what was registered. Every endpoint compares the method with its fair
# control (``MethodStudy.control``), paired by pre-training seed.
#
# Where the mapping is an approximation, the endpoint's ``approximation`` says how:
#
# * **SMedBERT** (Zhang et al. 2021): NER on cMedQANER (F1) and question matching on
#   cMedQQ (accuracy) are the paper's own datasets and metrics. Its QA claim (cMedQA, WebMedQA) is
#   not an endpoint: ranking tasks have no per-example counts in the runner yet.
# * **KeBioLM** (Yuan et al. 2021): the claim is English BLURB NER (5 datasets, F1) and RE. kgplm
#   pre-trains every method on Chinese text with CMeKG, so the NER claim maps to the Chinese NER
#   tasks cMedQANER and cEHRNER (entity F1). RE has no Chinese task with labelled test data in the
#   runner (CMeIE's test labels are hidden): not registered.
# * **EMBERT** (Cai et al. 2021): cMedQANER (F1) is the paper's; cMedQQ is the paper's
#   dataset, but the paper reports F1 where kgplm's cMedQQ is scored by accuracy.
# * **eHealth** (Wang et al. 2021): the claim is the CBLUE average; CHIP-STS (macro-F1) is
#   one of its tasks. CBLUE's test labels are hidden, so kgplm scores a split carved from the public
#   data (``kgplm.evaluation.tasks``). CBLUE's NER (CMeEE) is replaced by cMedQANER (flat NER).
# * **EP-PLM** (Liu et al. 2022): the claim is query–title relevance (QTRel-easy/-hard),
#   query intent and query NER on a private medicinal-product search dataset kgplm does not have.
#   CHIP-STS (medical sentence-pair matching, macro-F1) stands in for query–title relevance. The
#   knowledge the paper's product attribute prediction (PAP) injects is measured directly by the
#   method's own evaluation "PAP AUC" (held-out drug–indication pairs against popularity- and
#   length-matched negatives, :mod:`kgplm.methods.epplm.evaluation`); the paper reports no such
#   number, so this endpoint tests the mechanism the claim rests on, not a number of the paper.

SMEDBERT = (
    Endpoint("cmedqaner", "entity_f1", claim="NER gain over BERT-style baselines on cMedQANER"),
    Endpoint("cmedqq", "accuracy", claim="question-matching gain on cMedQQ"),
)
KEBIOLM = (
    Endpoint(
        "cmedqaner",
        "entity_f1",
        claim="NER gain over PubMedBERT on BLURB NER",
        approximation="Chinese cMedQANER instead of English BLURB NER",
    ),
    Endpoint(
        "cehrner",
        "entity_f1",
        claim="NER gain over PubMedBERT on BLURB NER",
        approximation="Chinese cEHRNER instead of English BLURB NER",
    ),
)
EMBERT = (
    Endpoint("cmedqaner", "entity_f1", claim="gain on cMedQANER F1"),
    Endpoint(
        "cmedqq",
        "accuracy",
        claim="gain on cMedQQ",
        approximation="the paper reports F1 on cMedQQ; kgplm scores it by accuracy",
    ),
)
EHEALTH = (
    Endpoint(
        "chip-sts",
        "macro_f1",
        claim="gain on CBLUE, CHIP-STS among its tasks",
        approximation="CBLUE's hidden test set replaced by a split of the public data",
    ),
    Endpoint(
        "cmedqaner",
        "entity_f1",
        claim="gain on CBLUE NER, CMeEE",
        approximation="flat NER on cMedQANER instead of nested NER on CMeEE",
    ),
)
EPPLM = (
    Endpoint(
        "chip-sts",
        "macro_f1",
        claim="gain on query–title relevance, QTRel-easy/-hard",
        approximation="CHIP-STS sentence-pair matching stands in for the private query–title relevance data",
    ),
    Endpoint(
        "PAP AUC",
        "auc",
        claim="PAP injects drug–attribute knowledge",
        approximation="the method's own held-out PAP AUC (not a number the paper reports)",
    ),
)


# -- the records ------------------------------------------------------------------------------------------------
# A results version is bumped by every fix that changes a method's numbers:
# mlm 2: the linker's default filters change the mentions whole-entity masking reads; 3: the vocabulary is
#   built by kgplm's deterministic WordPiece learner.
# smedbert 2: MNeM entity copy path closed, R-GCN per-mention subgraphs, PEPR auto from a cost model, linker
#   defaults; 3: the deterministic vocabulary; 4: PEPR fast mode's tree closure and refine="auto" change the
#   neighbour tables.
# kebiolm 2: whole-word masking outside mentions, bf16 fusion, linker defaults; 3: the deterministic vocabulary.
# embert 2: replacements in the mention's script, capped, no KG neighbours; linker defaults; 3: the vocabulary.
# electra 2: as eHealth's control it corrupts two views; the linker's defaults; 3: the vocabulary.
# ehealth 2: MTS target-counted, two-view control and no_csp, linker defaults; 3: the vocabulary.
# epplm 2: frequency-matched PAP negatives, exact ρ, held-out drugs' text removed; 3: the vocabulary.
add(MethodStudy("mlm", results_version=3))
add(
    MethodStudy(
        "smedbert",
        results_version=4,
        primary_endpoints=SMEDBERT,
        control=Control("mlm", masking="whole_entity", model_options={"use_sop": True}),
        ablations={
            "no_hybrid_attention": {"use_hybrid_attention": False},
            "no_knowledge_losses": {"use_knowledge_losses": False},
        },
        # which part of the gain is the entity's identity and type (what a gazetteer of the linked mentions
        # carries), which the graph's relational knowledge: the rows give the control the same information
        attribution_rows={
            "control + typed gazetteer": AttributionRow(
                base="control",
                finetune_options={"mention_spans": "typed"},
                compare_with="method",
                description="the control fine-tuned with SMedBERT's linked mentions (the same linker, spans and "
                "entity ids) as a typed gazetteer: begin/inside markers per mention, the entity's KG type and "
                "its own KG vector (the KG embedding table SMedBERT's runs read), no neighbours; the method's gain "
                "over it is what the neighbours and the pre-training add beyond identity and type",
            ),
            "shuffled graph": AttributionRow(
                base="method",
                train_options={"graph_shuffle_seed": 0},
                compare_with="method",
                description="SMedBERT whose PEPR neighbours and KG embeddings come from the graph with its links "
                "attached to the wrong entities across all types (same spans, same graph shape, wrong "
                "knowledge; the neighbours still fingerprint the entity, its type is lost)",
            ),
            "type-preserving shuffled graph": AttributionRow(
                base="method",
                train_options={"graph_shuffle": "within_types", "graph_shuffle_seed": 0},
                compare_with="method",
                description="SMedBERT whose links move to another entity of the same type (a derangement within "
                "each type): the entity's type survives, its relational knowledge does not, which separates "
                "the two",
            ),
        },
    )
)
add(
    MethodStudy(
        "kebiolm",
        results_version=3,
        primary_endpoints=KEBIOLM,
        control=Control("mlm", masking="word_entity"),
        ablations={
            "random_entity_init": {"entity_init": "random"},
            "frozen_entities": {"freeze_entity_embeddings": True},
            "no_fusion_layers": {"fusion_layers": 0},
            # §4.5 (a) −wem: "remove whole entity masking and retain whole word masking"
            "no_whole_entity_masking": Ablation(masking="whole_word"),
        },
        # "learned to find mentions" against "used the entities"
        attribution_rows={
            "control + silver NER": AttributionRow(
                base="method",
                model_options={"entity_linking": False, "entity_fusion": False},
                compare_with="method",
                description="the control's MLM pre-training plus KeBioLM's mention detection (BIO tags of the "
                "dictionary's mentions, L_ED) with no entity linking and no fusion; the method's gain over it "
                "is what the entities add beyond learning to find mentions",
            ),
            "linking without fusion": AttributionRow(
                base="method",
                model_options={"entity_fusion": False},
                compare_with="method",
                description="KeBioLM's detection and linking losses (L_ED + L_EL) with nothing fused into the "
                "token states: the text representation does not read the entity table; the method's gain "
                "over it is what fusing the linked entities adds",
            ),
        },
    )
)
add(
    MethodStudy(
        "embert",
        results_version=3,
        primary_endpoints=EMBERT,
        control=Control("mlm"),
        ablations={
            "no_consistency": {"use_cecp": False},
            "no_bidirectional_masking": {"use_bem": False},
            "no_segmentation": {"use_es": False},
            "no_knowledge_tasks": {"use_cecp": False, "use_es": False, "use_bem": False},
        },
    )
)
add(MethodStudy("electra", results_version=3))
add(
    MethodStudy(
        "ehealth",
        results_version=3,
        primary_endpoints=EHEALTH,
        # the control corrupts every sequence twice, as eHealth does: the same RTD/MLM targets per step
        control=Control(
            "electra",
            masking="whole_word",
            model_options={"mask_fraction": 0.8, "random_fraction": 0.1, "corruption_views": 2},
        ),
        ablations={"no_mts": {"use_mts": False}, "no_csp": {"use_csp": False}},
    )
)
add(
    MethodStudy(
        "epplm",
        results_version=3,
        primary_endpoints=EPPLM,
        control=Control("electra", masking="word_entity", model_options={"mask_fraction": 1.0, "random_fraction": 0.0}),
    )
)
