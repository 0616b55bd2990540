"""Sphinx configuration of the kgplm documentation (``make docs``: warnings are errors)."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout's kgplm, and let tools/ be imported

project = "kgplm"
author = "The kgplm developers"
copyright = "The kgplm developers; Apache-2.0"
try:
    release = importlib.metadata.version("kgplm")
except importlib.metadata.PackageNotFoundError:
    release = "0+unknown"
version = release

extensions = [
    "myst_nb",  # Markdown pages (MyST) and notebooks with their stored outputs
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "notebooks/*.py"]
templates_path = ["_templates"]

myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath", "deflist"]
myst_heading_anchors = 3
# The notebooks are rendered with the outputs stored in them; the docs build never runs them.
nb_execution_mode = "off"
nb_merge_streams = True

autosummary_generate = True
autosummary_imported_members = False
# a package documents what it defines; what it re-exports is documented where it is defined
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# transformers' and torch's docstrings of inherited methods are theirs to render, not kgplm's
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Cross-references to other projects are not looked up over the network (the build runs offline);
# unresolved external names are rendered as plain text.
intersphinx_mapping: dict = {}

html_theme = "furo"
html_title = f"kgplm {release}"

html_show_sourcelink = False

suppress_warnings = [
    "myst.xref_missing",  # relative links to repository files outside docs/ (they render as text)
]


#: ``|x|`` in a docstring is an absolute value or a set's size, not a reStructuredText substitution
_BARS = re.compile(r"(?<![\\\w`|])\|([^|\s`][^|`\n]*?)\|(?![\w|])")


def _escape_bars(app, what, name, obj, options, lines) -> None:
    lines[:] = [_BARS.sub(r"\\|\1\\|", line) for line in lines]


_BULLET = re.compile(r"^(\s*)([-*•]|\d+[.)]|\(\w\)|:[^:]+:)\s+")
_TABLE_BORDER = re.compile(r"^\s*=+( +=+)+\s*$")
_UNDERLINE = re.compile(r"^\s*([-=~^])\1{2,}\s*$")


def plain_text_blocks(lines: list[str]) -> list[str]:
    """Docstrings written as plain text: an indented run of lines under a paragraph (an equation, a
    table) becomes a literal block, a paragraph that ends without a blank line gets one, and a
    title underlined with dashes becomes a bold line (docstrings hold no sections)."""
    out: list[str] = []
    paragraph_indent = literal_indent = None
    table_borders = 0  # inside a reStructuredText simple table: its border lines seen so far
    for line in lines:
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        if _TABLE_BORDER.match(line) or table_borders:
            table_borders += bool(_TABLE_BORDER.match(line))
            out.append(line)
            if table_borders == 3:
                table_borders = 0
                paragraph_indent = None
            continue
        if not stripped:
            out.append(line)
            paragraph_indent = None
            continue
        if literal_indent is not None:
            if indent > literal_indent:
                out.append(line)
                continue
            literal_indent = None
            out.append("")
            paragraph_indent = None
        if _UNDERLINE.match(line) and out and out[-1].strip() and paragraph_indent is not None:
            out[-1] = " " * paragraph_indent + f"**{out[-1].strip()}**"
            out.append("")
            paragraph_indent = None
            continue
        if paragraph_indent is None:
            bullet = _BULLET.match(line)
            paragraph_indent = len(bullet.group(0)) if bullet else indent
            out.append(line)
        elif indent > paragraph_indent and not out[-1].rstrip().endswith("::"):
            previous = out[-1].rstrip()
            out[-1] = previous + (":" if previous.endswith(":") else " ::")
            out.append("")
            out.append(line)
            literal_indent = paragraph_indent
        elif indent < paragraph_indent and not _BULLET.match(line):
            out.append("")
            out.append(line)
            paragraph_indent = indent
        else:
            if indent < paragraph_indent:
                paragraph_indent = len(_BULLET.match(line).group(0))
            out.append(line)
    return out


def _plain_text(app, what, name, obj, options, lines) -> None:
    if what == "module":  # module docstrings are plain text; functions' and classes' are Google style
        lines[:] = plain_text_blocks(lines)


def _write_method_pages(app) -> None:
    """One page per registered method, generated from its registry record and its own docstrings."""
    from tools.docs_pages import write_method_pages

    write_method_pages(Path(app.srcdir) / "methods")


def setup(app) -> None:
    app.connect("builder-inited", _write_method_pages)
    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("autodoc-process-docstring", _plain_text)
