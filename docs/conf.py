"""Sphinx configuration for the lti-adapters documentation.

Build (warnings are errors)::

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

The API reference is generated at build time from ``lti.__all__`` and
``adapters.__all__`` (plus a few public submodules) by the local extension
``docs/_ext/apigen.py``, so it lists every public name without hand edits.

Mathematics is rendered by MathJax. By default it is loaded from a CDN when a page is
viewed. To read the site offline, build with ``LTI_DOCS_MATHJAX=local`` (uses Debian's
``libjs-mathjax``, ``apt-get install libjs-mathjax fonts-mathjax``) or with
``LTI_DOCS_MATHJAX=<url or path of MathJax.js / tex-chtml.js>``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

# Executed tutorial figures are drawn off-screen and BLAS stays single-threaded, so a
# build on a busy 2-core machine stays quick and deterministic.
os.environ.setdefault("MPLBACKEND", "Agg")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import lti  # noqa: E402

project = "lti-adapters"
author = "the lti-adapters authors"
copyright = "the lti-adapters authors, BSD-3-Clause"  # noqa: A001
release = lti.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "matplotlib.sphinxext.plot_directive",
    "sphinx_copybutton",
    "myst_parser",
    "apigen",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# Benchmark tables are included from ../benchmarks/results/ (written by the scripts).
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
templates_path = ["_templates"]
# Single backticks in docstrings link to a Python object when one exists, else italics.
default_role = "autolink"
pygments_style = "sphinx"

# -- API reference ---------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # numpydoc parameter lines carry the types and shapes
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# Sections of the generated API pages: package -> extra submodules documented even
# without an ``__all__`` (every public submodule that defines ``__all__`` is documented
# anyway). Submodules that do not exist yet are skipped with a message.
apigen_packages = {"lti": ["lti.testing.strategies"], "adapters": ["adapters.scan"]}
apigen_outdir = "api/generated"

# -- Executed tutorials (matplotlib plot directive) ------------------------------------
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]
plot_rcparams = {"figure.dpi": 110, "savefig.bbox": "tight"}
plot_apply_rcparams = True

# -- MathJax -----------------------------------------------------------------------------
_DEBIAN_MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")
_mathjax = os.environ.get("LTI_DOCS_MATHJAX", "")
if _mathjax == "local":
    if not _DEBIAN_MATHJAX.is_file():
        raise RuntimeError(
            "LTI_DOCS_MATHJAX=local needs Debian's MathJax: "
            "`apt-get install libjs-mathjax fonts-mathjax`"
        )
    mathjax_path = _DEBIAN_MATHJAX.as_uri() + "?config=TeX-AMS_CHTML"
elif _mathjax:
    mathjax_path = _mathjax

# -- HTML --------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"lti-adapters {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_show_sourcelink = False
html_theme_options = {
    "navbar_align": "left",
    "header_links_before_dropdown": 8,
    "navbar_persistent": [],
    "navbar_end": ["search-button", "theme-switcher"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {
    "index": [], "installation": [], "method": [], "contributing": [], "comparison": [],
}
# Code-heavy pages get the full width: no "on this page" column.
html_theme_options["secondary_sidebar_items"] = {
    "*": ["page-toc"], "theory/*": ["page-toc"], "api/**": ["page-toc"],
    "tutorials/*": [], "quickstart/*": [],
}

myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
