"""CMeKG, the Chinese Medical Knowledge Graph, as a :class:`~kgplm.kg.store.KGStore`.

Sources: a ``subject<TAB>predicate<TAB>object`` TSV (optionally gzip), or — with ``path=None`` —
the dict ``{subject: {predicate: [object, ...]}}`` pickled inside the PyPI package ``pycmekg``
(file ``pyCMeKG/model/cmekg.pkl``), read through an unpickler that accepts only dict, list and
str (it refuses every class, so the file cannot run code).

CMeKG has no entity-type field and mixes links with literal attributes under Chinese
predicates. kgplm applies these rules (``CMEKG_RULES`` below holds the tables):

**Which predicates link entities** (``LINK_PREDICATES``): clinical relations whose objects are
names of things — indications (适应症, 主治, 功能主治), symptoms and adverse reactions (常见症状,
相关症状, 临床症状及体征, 不良反应), ingredients (成份, 组成), related drugs and diseases,
complications, differential diagnoses, departments (就诊科室), examinations (检查, 实验室检查,
影像学检查 ...), treatments (治疗, 手术治疗, 辅助治疗, 药物治疗), body sites (发病部位 ...), causes
(常见病因, 病因, 高危因素), drug interactions and the hierarchy (上位关系, 下位关系). An object
holding several names separated by ``；`` or ``;`` links to each of them; empty objects are
dropped. **Every other predicate is a literal attribute** (用法用量, 性状, 贮藏, 规格, 注意事项,
ICD10, 有效期, 分类, 药品类型, the taxonomy ranks 界门纲目科属种, ...): kept as text, never an edge.

**Aliases** (``ALIAS_PREDICATES``): 别称, 又称, 同义词, 其他名称, 英文名, 英文名称, 英文别名,
英文别称, 外文名, 英文, 通用名, 商品名, 中文名, 中文学名, 学名, 拉丁学名, 名称, 药品名称 — the object
becomes an alias of the subject (language tag ``zh`` when it contains a CJK character, else
``en``; ``la`` for 拉丁学名). When the alias is itself a CMeKG subject (most 通用名 and 商品名 are),
the two entities are also linked by an equivalence relation named by the predicate, and the
subject's name becomes an alias of the other entity, as ``owl:sameAs`` is treated in RDF.

**Synonyms that merge** (``SYNONYM_PREDICATES``: 别称, 又称, 同义词 — the alias predicates whose object
names the same thing). A synonym that is no CMeKG subject of its own but is the object of a link
(``脑出血 别称 脑溢血`` and ``癫痫持续状态 病因 脑溢血``) would otherwise be a separate, almost isolated
node, so that mentions of it never reach its subject's neighbours: it is merged into its subject —
the link reaches ``脑出血``, and ``脑溢血`` stays one of its aliases. A link from the subject to its
own synonym (``脑出血 鉴别诊断 脑溢血``) becomes a self-loop and is dropped. A name that is an alias
(under any alias predicate) of two or more subjects is ambiguous and is not merged: it stays its own
node, as before (``store.entity_id`` then finds it by its display name, and
:class:`~kgplm.exceptions.AmbiguousEntityError` where no display name decides). The other alias
predicates do not merge: 名称, 通用名 and 商品名 often name a component or a maker, and the English
ones hold placeholders such as 暂不明确. ``describe()["merged_entities"]`` counts the merged names
(505 on the full dump, carrying 12,125 links). The merge trusts CMeKG's 别称 as much as CMeKG does:
most merged names are true synonyms (流感 → 流行性感冒, 鼻出血 → 鼻衄, 阳萎 → 勃起功能障碍), but a
general term that one page lists as its alias follows that page (惊厥, used in 939 links, becomes
慢惊风; 消化不良 becomes 功能性消化不良). ``merge_synonyms=False`` keeps such names as nodes of their own.

**Entity types** are derived, first rule that applies:

1. from the predicates a subject has (``SUBJECT_TYPE_SIGNATURES``, checked in this order):
   ``medicinal_material`` (taxonomy ranks, 入药部位, 性味, 采收时间 — crude drugs of Chinese
   medicine), ``prescription`` (组成, 功用, 出处 — formulae), ``drug`` (成份, 适应症, 不良反应,
   用法用量, 规格, 通用名 ...), ``disease`` (常见症状, 就诊科室, 并发症, ICD10, clinical-pathway
   predicates ...), ``symptom`` (所属分类, or 相关疾病 together with 相关症状 — CMeKG's symptom pages);
2. otherwise from the range of the link predicates whose object it is (``PREDICATE_RANGES``:
   常见症状 → symptom, 适应症 → disease, 相关药物 → drug, 就诊科室 → department, 检查 →
   examination, ...), the most frequent range winning (ties: the order of ``TYPE_PRIORITY``);
3. otherwise untyped.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pickle
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from kgplm._io import iter_lines
from kgplm.exceptions import ArtifactError, DataFormatError, MissingFileError
from kgplm.kg.collector import GraphCollector
from kgplm.kg.vocabulary import KGPLM_NAMESPACE, LABEL_ROLES, mint_iri

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = [
    "read_cmekg",
    "iter_cmekg_triples",
    "cmekg_package_path",
    "LINK_PREDICATES",
    "ALIAS_PREDICATES",
    "SYNONYM_PREDICATES",
    "PREDICATE_RANGES",
    "SUBJECT_TYPE_SIGNATURES",
    "TYPE_PRIORITY",
    "split_object",
    "cjk_language",
]

logger = logging.getLogger(__name__)

CMEKG_NAMESPACE = KGPLM_NAMESPACE + "cmekg/"

#: link predicate -> the type its object takes (None: no type implied)
PREDICATE_RANGES: dict[str, str | None] = {
    # indications and diseases
    "适应症": "disease",
    "适应证": "disease",
    "主治": "disease",
    "功能主治": "disease",
    "主要适用症": "disease",
    "主治病症": "disease",
    "相关疾病": "disease",
    "并发症": "disease",
    "鉴别诊断": "disease",
    "药物引起的并发症": "disease",
    "手术引起的并发症": "disease",
    "治疗引起的并发症": "disease",
    # symptoms and adverse reactions
    "常见症状": "symptom",
    "相关症状": "symptom",
    "临床症状及体征": "symptom",
    "主要症状": "symptom",
    "不良反应": "symptom",
    "用药后不良反应": "symptom",
    "术后症状": "symptom",
    # ingredients and drugs
    "成份": "ingredient",
    "组成": "ingredient",
    "相关药物": "drug",
    "药物治疗": "drug",
    "药物相互作用": "drug",
    "主要用药": "drug",
    # care
    "就诊科室": "department",
    "所属科室": "department",
    "检查": "examination",
    "实验室检查": "examination",
    "影像学检查": "examination",
    "辅助检查": "examination",
    "内窥镜检查": "examination",
    "组织学检查": "examination",
    "筛查": "examination",
    "住院必检项目": "examination",
    "术前准备_必检项目": "examination",
    "其他检查": "examination",
    "治疗": "treatment",
    "手术治疗": "treatment",
    "辅助治疗": "treatment",
    "放射治疗": "treatment",
    "化疗": "treatment",
    # anatomy and causes
    "常见发病部位": "body_part",
    "发病部位": "body_part",
    "转移部位": "body_part",
    "外侵部位": "body_part",
    "常见病因": "cause",
    "病因": "cause",
    "主要病因": "cause",
    "高危因素": "cause",
    "诱发因素": "cause",
    # hierarchy: the object has the subject's kind, which the subject rules decide
    "上位关系": None,
    "下位关系": None,
}
LINK_PREDICATES = frozenset(PREDICATE_RANGES)

#: alias predicate -> language tag (None: decided by script, zh when the value has a CJK character)
ALIAS_PREDICATES: dict[str, str | None] = {
    "别称": None,
    "又称": None,
    "同义词": None,
    "其他名称": None,
    "名称": None,
    "药品名称": None,
    "中文名": None,
    "中文学名": None,
    "学名": None,
    "通用名": None,
    "商品名": None,
    "英文名": None,
    "英文名称": None,
    "英文别名": None,
    "英文别称": None,
    "外文名": None,
    "英文": None,
    "拉丁学名": "la",
}
#: alias predicates whose alias-only objects merge into their subject when a link names them
SYNONYM_PREDICATES = frozenset({"别称", "又称", "同义词"})

_MEDICINAL_MATERIAL = {
    "界",
    "门",
    "纲",
    "目",
    "科",
    "属",
    "种",
    "入药部位",
    "性味",
    "采收时间",
    "采收季节",
    "采集时间",
    "分布区域",
    "性味归经",
}
_PRESCRIPTION = {"组成", "功用", "出处"}
_DRUG = {
    "成份",
    "适应症",
    "不良反应",
    "用法用量",
    "药品类型",
    "OTC类型",
    "规格",
    "药品监管分级",
    "通用名",
    "商品名",
    "有效期",
    "药物相互作用",
    "用途分类",
    "贮藏",
    "是否处方药",
    "批准文号",
}
_DISEASE = {
    "常见症状",
    "就诊科室",
    "并发症",
    "常见病因",
    "ICD10",
    "多发群体",
    "临床症状及体征",
    "高危因素",
    "鉴别诊断",
    "发病部位",
    "常见发病部位",
    "传染性",
    "传播途径",
    "出院标准",
    "标准住院时间",
    "进入路径标准",
    "病理分型",
}
_SYMPTOM = {"所属分类"}

#: (type, predicates that mark a subject as that type), checked in this order
SUBJECT_TYPE_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    ("medicinal_material", frozenset(_MEDICINAL_MATERIAL)),
    ("prescription", frozenset(_PRESCRIPTION)),
    ("drug", frozenset(_DRUG)),
    ("disease", frozenset(_DISEASE)),
    ("symptom", frozenset(_SYMPTOM)),
)
#: tie-break between range types of an object-only entity
TYPE_PRIORITY = (
    "disease",
    "symptom",
    "drug",
    "ingredient",
    "examination",
    "treatment",
    "department",
    "body_part",
    "cause",
    "medicinal_material",
    "prescription",
)

_SEPARATORS = re.compile(r"[；;]")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")


def split_object(value: str) -> list[str]:
    """Names in a link object: split on ``；``/``;``, stripped, empty parts dropped."""
    return [part.strip() for part in _SEPARATORS.split(value) if part.strip()]


def cjk_language(text: str) -> str:
    """``zh`` when the text has a CJK character, else ``en``."""
    return "zh" if _CJK.search(text) else "en"


def subject_type(predicates: set[str]) -> str | None:
    """The type a subject takes from the predicates it has (rule 1), or None."""
    for type_name, signature in SUBJECT_TYPE_SIGNATURES:
        if predicates & signature:
            return type_name
    if "相关疾病" in predicates and "相关症状" in predicates:
        return "symptom"
    return None


class _RestrictedUnpickler(pickle.Unpickler):
    """Accepts only the built-in containers the CMeKG dump uses; refuses every global."""

    def find_class(self, module: str, name: str):  # noqa: D401
        raise ArtifactError(f"the CMeKG pickle refers to {module}.{name}; only dict, list and str are allowed")


def cmekg_package_path() -> Path:
    """Path of ``cmekg.pkl`` inside the installed ``pycmekg`` package (the package is not imported)."""
    spec = importlib.util.find_spec("pyCMeKG")
    if spec is None or not spec.submodule_search_locations:
        raise MissingFileError("pyCMeKG (pip install pycmekg)", "package")
    path = Path(list(spec.submodule_search_locations)[0]) / "model" / "cmekg.pkl"
    if not path.is_file():
        raise MissingFileError(path, "CMeKG pickle of the pycmekg package")
    return path


def _iter_package_triples() -> Iterator[tuple[int, str, str, str]]:
    path = cmekg_package_path()
    with open(path, "rb") as handle:
        data = _RestrictedUnpickler(handle).load()
    if not isinstance(data, dict):
        raise ArtifactError(f"{path}: expected a dict of subjects, found {type(data).__name__}")
    row = 0
    for subject, predicates in data.items():
        if not isinstance(subject, str) or not isinstance(predicates, dict):
            raise ArtifactError(f"{path}: subject {subject!r} does not map to a dict of predicates")
        for predicate, objects in predicates.items():
            if not isinstance(objects, list):
                objects = [objects]
            for obj in objects:
                if not isinstance(predicate, str) or not isinstance(obj, str):
                    raise ArtifactError(f"{path}: non-string predicate or object under subject {subject!r}")
                row += 1
                yield row, subject, predicate, obj


def iter_cmekg_triples(path: str | os.PathLike | None = None) -> Iterator[tuple[int, str, str, str]]:
    """Yield ``(line_or_row, subject, predicate, object)`` from a CMeKG TSV or the ``pycmekg`` package."""
    if path is None:
        yield from _iter_package_triples()
        return
    for line_number, line in iter_lines(path):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataFormatError(
                f"{len(fields)} tab-separated fields",
                path=path,
                line=line_number,
                expected="3 fields: subject, predicate, object",
            )
        yield line_number, fields[0], fields[1], fields[2]


def _synonym_targets(rows, subjects: set[str]) -> dict[str, str]:
    """Synonym → its subject, for synonyms (``SYNONYM_PREDICATES``) that are no subject and are an
    alias of exactly one subject (under any alias predicate); the rule in the module docstring."""
    owners: dict[str, set[str]] = defaultdict(set)
    synonyms: set[str] = set()
    for _, subject, predicate, obj in rows:
        if predicate in ALIAS_PREDICATES:
            alias = obj.strip()
            if alias and alias != subject and alias not in subjects:
                owners[alias].add(subject)
                if predicate in SYNONYM_PREDICATES:
                    synonyms.add(alias)
    return {alias: next(iter(owners[alias])) for alias in synonyms if len(owners[alias]) == 1}


def read_cmekg(
    path: str | os.PathLike | None = None, *, merge_synonyms: bool = True, show_progress: bool = True
) -> KGStore:
    """Load CMeKG with the rules of this module's docstring.

    Args:
        path: a ``subject<TAB>predicate<TAB>object`` TSV (``.gz`` allowed); None (or ``"cmekg"``) reads
            the copy in the installed ``pycmekg`` package.
        merge_synonyms: merge alias-only synonyms that links name into their subject (see "Synonyms
            that merge"); False keeps them as nodes of their own, as kgplm did before.
    """
    if path is not None and str(path).lower() == "cmekg":
        path = None
    location = str(path) if path is not None else "pycmekg package"
    rows = list(
        tqdm(
            iter_cmekg_triples(path),
            desc="reading CMeKG",
            unit=" triples",
            unit_scale=True,
            disable=not show_progress,
            leave=False,
        )
    )
    collector = GraphCollector(source="cmekg", location=location)
    entity = lambda name: collector.entity(mint_iri(CMEKG_NAMESPACE, "entity", name))  # noqa: E731

    predicates_of: dict[str, set[str]] = defaultdict(set)
    for _, subject, predicate, _ in rows:
        predicates_of[subject].add(predicate)
    subjects = set(predicates_of)
    merge_into = _synonym_targets(rows, subjects) if merge_synonyms else {}
    merged_names: set[str] = set()
    dropped_self_links = 0

    alias_role = LABEL_ROLES.index("altLabel")
    derived_role = LABEL_ROLES.index("derived")
    range_votes: dict[int, Counter] = defaultdict(Counter)
    named: set[int] = set()

    def ensure_named(name: str) -> int:
        index = entity(name)
        if index not in named:
            named.add(index)
            collector.add_label(index, name, cjk_language(name), LABEL_ROLES.index("label"))
        return index

    for _, subject, predicate, obj in rows:
        head = ensure_named(subject)
        if predicate in PREDICATE_RANGES:
            relation = collector.relation(mint_iri(CMEKG_NAMESPACE, "relation", predicate), predicate)
            for name in split_object(obj):
                target = merge_into.get(name)
                if target is not None:  # a synonym of one subject: the link reaches that subject
                    merged_names.add(name)
                    if target == subject:
                        dropped_self_links += 1
                        continue
                    name = target
                tail = ensure_named(name)
                collector.add_triple(head, relation, tail)
                if PREDICATE_RANGES[predicate] is not None:
                    range_votes[tail][PREDICATE_RANGES[predicate]] += 1
        elif predicate in ALIAS_PREDICATES:
            alias = obj.strip()
            if not alias or alias == subject:
                continue
            language = ALIAS_PREDICATES[predicate] or cjk_language(alias)
            collector.add_label(head, alias, language, alias_role)
            if alias in subjects:
                # the alias is an entity of its own: keep the equivalence as a relation
                other = ensure_named(alias)
                relation = collector.relation(mint_iri(CMEKG_NAMESPACE, "relation", predicate), predicate)
                collector.add_triple(head, relation, other)
                collector.add_label(other, subject, cjk_language(subject), derived_role)
        else:
            if not obj.strip():
                continue
            attribute = collector.attribute_predicate(mint_iri(CMEKG_NAMESPACE, "attribute", predicate), predicate)
            collector.add_attribute(head, attribute, obj, cjk_language(obj) if _CJK.search(obj) else "")

    # entity types: subject signature first, then the most frequent range
    priority = {name: rank for rank, name in enumerate(TYPE_PRIORITY)}
    type_id = lambda name: collector.type(mint_iri(CMEKG_NAMESPACE, "type", name), name)  # noqa: E731
    typed = 0
    for name in predicates_of:  # dict order: first appearance
        type_name = subject_type(predicates_of[name])
        if type_name is not None:
            index = entity(name)
            collector.add_type(index, type_id(type_name))
            typed += 1
            range_votes.pop(index, None)
    for index, votes in sorted(range_votes.items()):
        collector.add_type(index, type_id(min(votes, key=lambda t: (-votes[t], priority[t]))))
    logger.info(
        "CMeKG: %d subjects typed by their predicates, %d entities by predicate ranges", typed, len(range_votes)
    )
    collector.merged_entities += len(merged_names)
    logger.info(
        "CMeKG: %d synonyms that links name merged into their subjects (%d links to one's own synonym dropped)",
        len(merged_names),
        dropped_self_links,
    )
    return collector.build(
        preferred_languages=("zh", "", "en"),
        copy_names_across_same_as=False,
        extra_manifest={
            "prefixes": {
                "cmekg": CMEKG_NAMESPACE + "entity/",
                "cmekgr": CMEKG_NAMESPACE + "relation/",
                "cmekgt": CMEKG_NAMESPACE + "type/",
                "cmekga": CMEKG_NAMESPACE + "attribute/",
            }
        },
    )
