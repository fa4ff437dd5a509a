"""From notebook to post: execution, cache, rendering, atomic publication.

Flow::

    notebooks/NN_topic.py --jupytext--> notebook --papermill(params/<slug>.yaml)-->
        build/executed/<slug>.ipynb + build/results/<slug>.json
    --render (nbconvert exporter, our preprocessors, our template)-->
        _posts/DATE-slug.md + images/<slug>/* + _data/results/<slug>.json

One module per concern; this face re-exports their public names:

- :mod:`.common`: the profiles, the project root, :class:`PublishError`.
- :mod:`.discovery`: the notebooks (:func:`discover`, :func:`select`), their
  header, read without jupytext, and their ``.ipynb`` pairs (:func:`check_pairs`).
- :mod:`.params`: profiles (:func:`detect_profile`) and each post's settings, ``params/<slug>.yaml``
  (:func:`load_params`).
- :mod:`.cache`: the key and the plan. A notebook runs again only when its key changes
  (its source, its parameters for the profile, the pinned requirements, and
  the library modules and data files its last run used: see
  :mod:`sidebyside.run.runkey`). The key is stored as ``source_hash`` in the
  published results file, with the recorded ``inputs``, so a fresh clone
  knows what is up to date. A post's GPU run is planned against its published
  GPU run and any other profile against its other run; a published cpu result
  is kept from a smoke run unless ``force``. :func:`freshness` is the one
  test of staleness (``execute``, ``list``, the scoreboard).
- :mod:`.running`: papermill, under the run context the notebook reads
  (:mod:`sidebyside.run.context`), and the published record.
- :mod:`.rendering`: the post (front matter, Markdown), with :mod:`.preprocess` (outputs,
  figures, paths and the host name scrubbed), :mod:`.escape` (every byte of cell output
  escaped), :mod:`.pairs` (side-by-side cells) and :mod:`.downloads`; a gpu run renders to its
  post's GPU section instead (:mod:`.gpu_section`), never to a post.
- :mod:`.runs`: a post's two runs published together: its cpu run the body, its GPU run a
  section; publishing one keeps the other unless its method was withdrawn (the record holds both:
  :func:`sidebyside.publish.records.split_runs`).
- :mod:`.site`: publication as a transaction per notebook. Everything is
  rendered before anything is written; the post, its images and its results
  are swapped in together under a journal, and a publication that died half
  way is rolled back or completed by the next run, which says which. A run
  holds the lock of its site and build folder. Before the swap, :mod:`.records` checks the
  record (its schema, what Jekyll will load) and :mod:`.caps` the post as a whole (its page,
  figures and share of the feed).
- :mod:`.scoreboard`: ``_data/freshness.json`` for the home page.
- :mod:`.pipeline`: the verbs, :func:`run` (``execute``), :func:`rerender` (``render``: only a
  completed run whose record matches the published one), :func:`list_notebooks` (``list``) and
  ``plan`` (:mod:`.schedule`).
- :mod:`.cli`: the command line, :func:`main`.

CLI: ``python -m sidebyside.publish {execute,render,list,plan,reproduce,aa,merge,profile,check-pairs} ...``
(``--help`` on each). The Makefile drives it. Nothing here imports PyTorch or
JAX; nbconvert, papermill and jupytext are imported only where they are used.
"""

from __future__ import annotations

from sidebyside.publish.cache import Decision, cache_key, freshness, plan
from sidebyside.publish.cli import main
from sidebyside.publish.common import PROFILES, ROOT, PublishError
from sidebyside.publish.discovery import NotebookInfo, check_pairs, discover, notebook_info, read_notebook_info, select
from sidebyside.publish.params import check_profile, detect_profile, load_all_params, load_params
from sidebyside.publish.pipeline import list_notebooks, rerender, run
from sidebyside.publish.preprocess import collapse_progress, kramdown_math, scrub
from sidebyside.publish.rendering import drop_title_heading, front_matter, front_matter_text, render
from sidebyside.publish.running import complete_record, execute
from sidebyside.publish.site import publish, recover

__all__ = [
    "PROFILES",
    "ROOT",
    "PublishError",
    "NotebookInfo",
    "discover",
    "select",
    "notebook_info",
    "read_notebook_info",
    "check_pairs",
    "detect_profile",
    "check_profile",
    "load_params",
    "load_all_params",
    "cache_key",
    "freshness",
    "Decision",
    "plan",
    "execute",
    "complete_record",
    "render",
    "front_matter",
    "front_matter_text",
    "drop_title_heading",
    "scrub",
    "collapse_progress",
    "kramdown_math",
    "recover",
    "publish",
    "run",
    "rerender",
    "list_notebooks",
    "main",
]
