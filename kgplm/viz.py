"""Drawings of a knowledge graph: an entity's neighbourhood, with its PEPR top-K ranked.

:func:`draw_neighbourhood` draws the entity in the centre and its top-K neighbours by personalised
entity PageRank (the neighbours SMedBERT reads, :func:`kgplm.kg.pepr.top_k_neighbors`) on a circle
around it, rank 1 at the top and the ranks following clockwise. Each edge carries its relation's
name and points from head to tail; each node is coloured by its entity type (the legend names the
types) and a ranked node shows its rank and score. ``show_others=True`` adds the entity's other
one-hop neighbours on an outer circle, in grey with thin edges, so the top-K stand out among all
candidates.

The drawing is static, with matplotlib (``pip install 'kgplm[viz]'``). Entity names in Chinese,
Japanese or Korean need a font with those characters: the first installed one of
:data:`CJK_FONTS` is used, or the Noto Sans CJK font shipped by the ``mplfonts`` package (part of
the ``viz`` extra) when none is installed.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any


from kgplm.exceptions import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["CJK_FONTS", "NeighbourhoodDrawing", "draw_neighbourhood"]

logger = logging.getLogger(__name__)

#: font families tried, in order, for names with CJK characters
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Heiti SC",
)

_UNTYPED = "(untyped)"


@dataclass
class NeighbourhoodDrawing:
    """A drawn neighbourhood: the matplotlib figure and what it shows.

    Attributes:
        figure: the matplotlib ``Figure``; ``drawing.figure.savefig("n.png")`` writes it.
        entity: the entity in the centre (id).
        ranked: the top-K neighbours' ids, rank 1 first.
        scores: their PEPR scores, in the same order.
        others: the other one-hop neighbours drawn (``show_others=True``), else empty.
        node_ids: every drawn node's id: the entity, the ranked neighbours, then the others.
    """

    figure: Any
    entity: int
    ranked: list[int]
    scores: list[float]
    others: list[int] = field(default_factory=list)

    @property
    def node_ids(self) -> list[int]:
        return [self.entity, *self.ranked, *self.others]

    def save(self, path: str | os.PathLike, **savefig_options) -> None:
        """Write the drawing (PNG, SVG, PDF … from the suffix) to a temporary name, then rename it."""
        path = os.fspath(path)
        root, suffix = os.path.splitext(path)
        temporary = f"{root}.tmp-{os.getpid()}{suffix}"
        self.figure.savefig(temporary, **{"dpi": 150, "bbox_inches": "tight", **savefig_options})
        os.replace(temporary, path)

    def _repr_png_(self) -> bytes:  # Jupyter shows the drawing
        import io

        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        return buffer.getvalue()


def _has_cjk(text: str) -> bool:
    return any(
        "\u2e80" <= character <= "\u9fff" or "\uac00" <= character <= "\ud7af" or "\uf900" <= character <= "\ufaff"
        for character in text
    )


def _cjk_font() -> str | None:
    """The family name of an installed CJK font (or of ``mplfonts``' Noto Sans CJK SC, registered)."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    for family in CJK_FONTS:
        if family in installed:
            return family
    try:
        from importlib.resources import files

        shipped = files("mplfonts") / "fonts" / "NotoSansCJKsc-Regular.otf"
        if shipped.is_file():
            font_manager.fontManager.addfont(str(shipped))
            return font_manager.FontProperties(fname=str(shipped)).get_name()
    except ModuleNotFoundError:
        pass
    logger.warning(
        "no font with CJK characters found (install 'kgplm[viz]' or a Noto Sans CJK font): "
        "such names will show as boxes"
    )
    return None


def _ranked_neighbours(store: "KGStore", entity: int, k: int, pepr_options: dict) -> tuple[list[int], list[float]]:
    from kgplm.kg.pepr import top_k_neighbors

    options = {"show_progress": False, **pepr_options}
    table = top_k_neighbors(store, [entity], k=k, **options)
    keep = table.neighbors[0] >= 0
    return table.neighbors[0][keep].astype(int).tolist(), table.scores[0][keep].astype(float).tolist()


def _circle(count: int, radius: float) -> list[tuple[float, float]]:
    """``count`` points on a circle, the first at the top, the rest clockwise."""
    return [
        (radius * math.sin(2 * math.pi * i / max(count, 1)), radius * math.cos(2 * math.pi * i / max(count, 1)))
        for i in range(count)
    ]


def _edges(store: "KGStore", entity: int) -> dict[int, list[tuple[str, str]]]:
    """neighbour id -> [(relation name, "out" | "in")] of every triple between ``entity`` and it."""
    neighbours, relations, directions = store.one_hop(entity)
    edges: dict[int, list[tuple[str, str]]] = {}
    for neighbour, relation, direction in zip(neighbours.tolist(), relations.tolist(), directions.tolist()):
        edges.setdefault(int(neighbour), []).append((store.relation_name(relation), "out" if direction == 0 else "in"))
    return edges


def draw_neighbourhood(
    store: "KGStore",
    entity: int | str,
    *,
    k: int = 10,
    show_others: bool = False,
    max_others: int = 30,
    ax=None,
    figsize: tuple[float, float] = (8.0, 8.0),
    title: str | None = None,
    **pepr_options,
) -> NeighbourhoodDrawing:
    """Draw ``entity``'s one-hop neighbourhood with its PEPR top-``k`` ranked.

    Args:
        store: the graph.
        entity: an entity id, or a name, alias or IRI that :meth:`KGStore.entity_id` resolves.
        k: how many neighbours to rank (fewer are drawn when the entity has fewer neighbours).
        show_others: also draw the other one-hop neighbours, in grey on an outer circle.
        max_others: at most this many other neighbours (the first by id); a note says how many were left out.
        ax: a matplotlib ``Axes`` to draw into; a new figure otherwise.
        figsize: the size of a new figure, in inches.
        title: the title; by default the entity's name, type and ``k``.
        **pepr_options: passed to :func:`kgplm.kg.pepr.top_k_neighbors` (``alpha``, ``mode``, ``tol`` …).

    Returns:
        A :class:`NeighbourhoodDrawing` holding the figure and the drawn ids, ranks and scores.

    Raises:
        ConfigurationError: ``k`` is not a positive integer or ``max_others`` is negative.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigurationError(f"k must be a positive integer (the number of neighbours to rank), got {k!r}")
    if isinstance(max_others, bool) or not isinstance(max_others, int) or max_others < 0:
        raise ConfigurationError(f"max_others must be a non-negative integer, got {max_others!r}")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    entity = store.entity_id(entity) if isinstance(entity, str) else int(entity)
    if not 0 <= entity < store.num_entities:
        raise ConfigurationError(f"entity id {entity} is outside the store's 0 … {store.num_entities - 1}")
    ranked, scores = _ranked_neighbours(store, entity, k, pepr_options)
    edges = _edges(store, entity)
    others = sorted(set(edges) - set(ranked) - {entity})
    left_out = max(0, len(others) - max_others) if show_others else 0
    others = others[:max_others] if show_others else []

    names = {node: store.entity_name(node) for node in [entity, *ranked, *others]}
    font = (
        _cjk_font()
        if any(_has_cjk(name) for name in names.values())
        or any(_has_cjk(relation) for node in ranked + others for relation, _ in edges.get(node, []))
        else None
    )
    text_options = {"fontfamily": font} if font else {}

    types = [store.entity_type(node) or _UNTYPED for node in [entity, *ranked, *others]]
    palette = plt.get_cmap("tab10")
    type_colour = {name: palette(i % 10) for i, name in enumerate(dict.fromkeys(types))}

    if ax is None:
        figure, ax = plt.subplots(figsize=figsize)
    else:
        figure = ax.figure
    positions = {entity: (0.0, 0.0)}
    positions.update(zip(ranked, _circle(len(ranked), 1.0)))
    positions.update(zip(others, _circle(len(others), 1.7)))

    for node in [*others, *ranked]:
        is_ranked = node in ranked
        (x0, y0), (x1, y1) = positions[entity], positions[node]
        for index, (relation, direction) in enumerate(edges.get(node, [])):
            start, end = ((x0, y0), (x1, y1)) if direction == "out" else ((x1, y1), (x0, y0))
            ax.annotate(
                "",
                xy=end,
                xytext=start,
                zorder=1,
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": "0.25" if is_ranked else "0.75",
                    "lw": 1.6 if is_ranked else 0.6,
                    "shrinkA": 14,
                    "shrinkB": 14,
                    "connectionstyle": f"arc3,rad={0.12 * index}",
                },
            )
            if is_ranked:
                fraction = 0.55 + 0.1 * index
                ax.text(
                    x0 + fraction * (x1 - x0),
                    y0 + fraction * (y1 - y0),
                    relation,
                    fontsize=8,
                    ha="center",
                    va="center",
                    color="0.2",
                    zorder=3,
                    gid=f"relation:{node}:{index}",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
                    **text_options,
                )

    for node, node_type in zip([entity, *ranked, *others], types):
        x, y = positions[node]
        is_centre, is_ranked = node == entity, node in ranked
        size = 900 if is_centre else (420 if is_ranked else 120)
        ax.scatter(
            [x],
            [y],
            s=size,
            color=type_colour[node_type],
            edgecolors="black" if is_ranked or is_centre else "none",
            linewidths=1.8 if is_centre else 1.0,
            alpha=1.0 if is_ranked or is_centre else 0.45,
            zorder=4,
            gid=f"node:{node}",
        )
        label = names[node]
        if is_ranked:
            rank = ranked.index(node)
            label = f"#{rank + 1} {label}\n{scores[rank]:.3g}"
        # labels sit outside the circle, away from the edges
        lx, ly = (0.0, -0.17) if is_centre else (x * (1.0 + 0.3 / math.hypot(x, y)), y * (1.0 + 0.3 / math.hypot(x, y)))
        ax.text(
            lx,
            ly,
            label,
            ha="center",
            va="top" if is_centre else "center",
            fontsize=12 if is_centre else (9 if is_ranked else 7),
            color="black" if is_ranked or is_centre else "0.45",
            zorder=5,
            gid=f"label:{node}",
            **text_options,
        )

    legend = [
        Line2D([], [], marker="o", linestyle="", markersize=9, color=colour, label=name)
        for name, colour in type_colour.items()
    ]
    ax.legend(
        handles=legend,
        title="entity type",
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        frameon=False,
        prop={"family": font} if font else None,
    )
    if left_out:
        ax.text(0.0, -2.05, f"{left_out} more one-hop neighbours not drawn", ha="center", fontsize=8, color="0.45")
    extent = 2.2 if others else 1.5
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_aspect("equal")
    ax.axis("off")
    entity_type = store.entity_type(entity) or _UNTYPED
    ax.set_title(
        title
        if title is not None
        else f"{names[entity]} ({entity_type}): PEPR top-{k} of {len(edges)} one-hop neighbours",
        **text_options,
    )
    return NeighbourhoodDrawing(figure=figure, entity=entity, ranked=ranked, scores=scores, others=others)
