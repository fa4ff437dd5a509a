"""What the site says about each published result, computed once for every page: the home
page's cards and scoreboard, a post's verdict box and its stale banner.

Input: the results records of a site (``_data/results/<slug>.json``), their freshness
(:mod:`.scoreboard`), and the method changelog, ``_data/method_changelog.yml`` (the site's,
else the repository's): a list of entries ``{date, commit, title, changed, kinds, posts,
supersedes}``, ``date`` an ISO date or date-time (a date alone means its first instant, UTC),
``kinds`` the verdict kinds it alters (:data:`KINDS`), ``posts`` the slugs (empty or absent:
every post), ``supersedes`` true when the change withdraws a method: a run older than it that it concerns
is superseded (:func:`superseding`), and none of its figures is shown until the post runs again.

Output: ``_data/board.json`` (:func:`write_board`), which the Liquid templates print and never
recompute: ``{"order": [slug, ...], "kinds": [...], "posts": {slug: post}}`` where a post
(:func:`post_view`) holds its card (headline question and answer in the winner's terms, its
scale, unsettled mark, hardware, run date, commit, states), the changelog entries after its run
(``since``), and its two runs (``runs``, :func:`run_view`: the cpu run, then the GPU run, each
with its hardware, date, commit and verdicts, or owed), each verdict (:func:`verdict_view`) with
its kind, answer, interval in the winner's direction, device, scale, superseded, suspect.

Notation, decided here only: a speed verdict reads "PyTorch 1.23× faster (1.22–1.30×)", the
interval the winner's speed-up like the factor (records store ``ratio`` and ``interval`` as
the subject's time over the other's); a tie or a difference within noise reads "practically
tied"; a seed verdict names its quantity ("PyTorch: lower normalised total variation ...").

Bounds: a record with more than :data:`MAX_VERDICTS` verdicts is refused (:class:`PublishError`);
the home page lists at most :data:`HOME_VERDICTS` per post (the rest are on the post).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from sidebyside.publish import anomalies, records, reruns
from sidebyside.publish.common import ROOT, PublishError, write_atomic

__all__ = ["KINDS", "MAX_VERDICTS", "HOME_VERDICTS", "CHANGELOG", "DEVICE_KINDS", "fmt_factor",
           "kind_of", "answer", "load_changelog", "superseding", "verdict_view", "card_scale",
           "run_view", "post_view", "board", "write_board"]

KINDS = ("speed", "accuracy", "numerics", "code", "memory")
MAX_VERDICTS = 50
HOME_VERDICTS = 5
CHANGELOG = Path("_data") / "method_changelog.yml"
NAMES = {"torch": "PyTorch", "jax": "JAX"}
#: The answer for each label that says the two sides could not be told apart, in the words of its own kind:
#: "practically tied" is a speed interval wholly inside the machine's noise floor (How we measure), and
#: nothing else; a speed interval holding 1 beyond it is no clear winner; seeds within seed noise; counts tied.
TIE_ANSWERS = {"practically tied": "practically tied", "within noise": "no clear winner (within noise)",
               "within seed noise": "within seed noise", "tie": "tied", "tied": "tied"}


def fmt_factor(x: float) -> str:
    """A speed-up as the site prints it: three significant figures, trailing zeros kept (1.30, 18.4, 120)."""
    x = float(x)
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _name(key: Any) -> str:
    return NAMES.get(str(key), str(key))


def kind_of(v: dict[str, Any]) -> str:
    """Which of :data:`KINDS` a verdict (``Verdict.to_dict()``) measures, read from its test and question."""
    test, question = str(v.get("test") or "").lower(), str(v.get("question") or "").lower()
    if v.get("ratio") is not None or test.startswith("ratio of"):
        return "speed"
    if "welch" in test or "seed" in test:
        return "accuracy"
    if "exact count" in test:
        return "code" if "code" in question else "memory"
    return "numerics"


def _winner_interval(v: dict[str, Any]) -> tuple[float, float] | None:
    interval, winner = v.get("interval"), v.get("winner")
    if not interval or len(interval) != 2 or winner is None:
        return None
    lo, hi = float(interval[0]), float(interval[1])
    if winner == v.get("subject"):  # the subject's time over the other's, < 1: the winner's speed-up is its inverse
        return (1 / hi, 1 / lo) if lo > 0 else None
    return lo, hi


def answer(v: dict[str, Any]) -> tuple[str, str]:
    """``(answer, interval)``: the verdict in the winner's terms, and for a speed verdict won by one
    side its interval in the same direction ("1.22–1.30×"; else "")."""
    label, winner = str(v.get("label") or ""), v.get("winner")
    kind = kind_of(v)
    if label in TIE_ANSWERS:
        return TIE_ANSWERS[label], ""
    if winner is None:
        return ("same numbers within tolerance" if label == "same" else label), ""
    who = _name(winner)
    if kind == "speed":
        # Records made before ``factor`` existed stored the winner's speed-up as ``ratio``.
        factor = v.get("factor") if v.get("factor") is not None else v.get("ratio")
        span = _winner_interval(v)
        text = f"{who} {fmt_factor(factor)}× faster" if factor else f"{who} faster"
        return text, (f"{fmt_factor(span[0])}–{fmt_factor(span[1])}×" if span else "")
    sentence = str(v.get("sentence") or "")
    if kind == "accuracy":
        found = re.search(r"reaches an? (higher|lower) (.+?): ", sentence)
        difference = v.get("difference")
        by = f", by {abs(float(difference)):.3g}" if difference is not None else ""
        if found:
            return f"{who}: {found.group(1)} {found.group(2)}{by}", ""
        return f"{who}: {label}{by}", ""
    found = re.search(r"needs fewer (.+?) than", sentence)
    if found:
        return f"{who} needs fewer {found.group(1)}", ""
    return f"{who}: {label}", ""


def _instant(text: Any) -> dt.datetime:
    """An ISO date or date-time as an aware date-time (a date alone: its first instant, UTC)."""
    if isinstance(text, dt.datetime):
        value = text
    elif isinstance(text, dt.date):
        value = dt.datetime(text.year, text.month, text.day)
    else:
        value = dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def load_changelog(site: Path, root: Path = ROOT) -> list[dict[str, Any]]:
    """The method changelog's entries, oldest first, each checked (date, title, changed, kinds
    among :data:`KINDS`) and given ``day`` (YYYY-MM-DD) for printing; ``[]`` without a file."""
    path = next((p for p in (Path(site) / CHANGELOG, Path(root) / CHANGELOG) if p.is_file()), None)
    if path is None:
        return []
    entries = yaml.safe_load(path.read_text()) or []
    out = []
    for n, entry in enumerate(entries, 1):
        missing = [k for k in ("date", "title", "changed", "kinds") if not entry.get(k)]
        unknown = sorted(set(entry.get("kinds") or []) - set(KINDS))
        if missing or unknown:
            raise PublishError(f"{path}: entry {n} ({entry.get('title', '?')}): "
                               + (f"missing {', '.join(missing)}" if missing else f"unknown kinds {unknown}; "
                                  f"use {', '.join(KINDS)}"))
        at = _instant(entry["date"])
        out.append({"date": at.isoformat(), "day": at.date().isoformat(), "title": str(entry["title"]),
                    "changed": " ".join(str(entry["changed"]).split()), "commit": str(entry.get("commit") or ""),
                    "kinds": list(entry["kinds"]), "posts": list(entry.get("posts") or []),
                    "supersedes": bool(entry.get("supersedes"))})
    return sorted(out, key=lambda e: e["date"])


def _since(record: dict[str, Any], changelog: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries dated after the run of ``record`` that concern its post."""
    ran = _instant(record.get("executed_at") or "1970-01-01")
    slug = record.get("slug")
    return [e for e in changelog if _instant(e["date"]) > ran and (not e["posts"] or slug in e["posts"])]


def _device(v: dict[str, Any], provenance: dict[str, Any]) -> tuple[str, str]:
    """``(device name, "cpu" | "gpu")`` a verdict ran on: its scale's device, else the CPU when its
    question says so, else the run's device."""
    named = (v.get("scale") or {}).get("device")
    question = str(v.get("question") or "")
    gpu_run = provenance.get("device_kind") == "gpu"
    if named:
        return str(named), "gpu" if gpu_run and str(named) == provenance.get("device") else "cpu"
    if re.search(r"\bon (the|a) CPU\b", question):
        return str(provenance.get("cpu") or "the CPU"), "cpu"
    return str(provenance.get("device") or "an unnamed device"), "gpu" if gpu_run else "cpu"


def superseding(run: dict[str, Any] | None, changelog: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The changelog entry that withdrew the method of ``run`` (a run record), or None while it stands:
    the latest entry marked ``supersedes`` that concerns its post and is dated after the run. A
    withdrawn run shows no figure anywhere (its body or GPU section, its verdicts, its card): its post
    owes that run again. The one test of a superseded run, for the publisher and the pages."""
    corrected = [e for e in _since(run, changelog) if e["supersedes"]] if run else []
    return corrected[-1] if corrected else None


def verdict_view(v: dict[str, Any], index: int, record: dict[str, Any], withdrawn: dict[str, Any] | None,
                 suspects: dict[int, str], again: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the pages show of one verdict: its kind, answer, interval (winner's terms), device,
    whether its run was measured under a method since withdrawn (``withdrawn``, the entry of
    :func:`superseding`: then no figure, ``answer`` is "superseded: re-run owed"), why it is
    suspect (``suspect``, "" when it is not), its spread between runs (``reruns``, from ``again``,
    its entry of :func:`.reruns.spread`; "" without one) and whether its answer changed between
    them (``unsettled``); ``scale``: its record's ``scale.text`` (what it raced: parameters, input,
    batch, precision, device; "" without one)."""
    kind = kind_of(v)
    device, device_kind = _device(v, record.get("provenance") or {})
    text, interval = answer(v)
    if withdrawn:
        text, interval = "superseded: re-run owed", ""
    return {"index": index, "question": str(v.get("question") or ""), "kind": kind, "answer": text,
            "interval": interval, "device": device, "device_kind": device_kind, "superseded": bool(withdrawn),
            "superseded_by": withdrawn["title"] if withdrawn else "",
            "suspect": "" if withdrawn else suspects.get(index, ""),
            "reruns": reruns.sentence(again) if again and not withdrawn else "",
            "unsettled": bool(again and not withdrawn and reruns.unsettled(again)),
            "scale": "" if withdrawn else str((v.get("scale") or {}).get("text") or "")}


#: What a scale may name as its device that says no more than a run's hardware line.
DEVICE_KINDS = ("CPU", "GPU", "the CPU", "the GPU")


def card_scale(scale: dict[str, Any] | None, hardware: str) -> str:
    """A verdict's scale as a card states it on its run's line, after the run's hardware line: the
    record's ``scale.text`` (parameters, input, batch, precision, device), less its closing ", on
    <device>" where that device is the hardware line itself or only its kind
    (:data:`DEVICE_KINDS`), which the line names in full before it; any other device ("8
    simulated CPU devices (...)") stays."""
    text, device = str((scale or {}).get("text") or ""), str((scale or {}).get("device") or "")
    if device and (device == hardware or device in DEVICE_KINDS):
        for tail in (f", on {device}", f"on {device}"):
            if text.endswith(tail):
                return text[:-len(tail)]
    return text


#: The two runs a post shows, in the order it shows them: ``(role, label, where in the record)``.
ROLES = (("cpu", "CPU run", ""), ("gpu", "GPU run", records.GPU_RUN))


def run_view(run: dict[str, Any] | None, role: str, changelog: list[dict[str, Any]], at: str = "",
             site: Path | None = None) -> dict[str, Any]:
    """What the pages show of one of a post's runs (``role`` "cpu" or "gpu", :data:`ROLES`): its
    hardware, date, commit and verdicts, headline first (its question, answer, interval, device and
    ``unsettled`` copied to the run's own fields, its ``scale`` as :func:`card_scale` says), or
    that it is owed (``owed``: no such run, or one measured under a withdrawn method,
    ``superseded``). ``at`` names where the verdict box reads the run in the results record (""
    its top level, else :data:`.records.GPU_RUN`); ``site``, where the log of its re-runs is read
    (:mod:`.reruns`; None: nowhere)."""
    label = next(lab for r, lab, _ in ROLES if r == role)
    record = run or {}
    slug = str(record.get("slug") or "")
    verdicts = [v for v in (record.get("metrics") or {}).get("verdicts") or [] if isinstance(v, dict)]
    if len(verdicts) > MAX_VERDICTS:
        raise PublishError(f"_data/results/{slug}.json holds {len(verdicts)} verdicts, more than the {MAX_VERDICTS} "
                           "a post may publish: merge or drop verdicts in its notebook's report, then run it again")
    withdrawn = superseding(run, changelog)
    suspects, notes = anomalies.find(record) if run else ({}, [])
    spreads = reruns.spread(site, slug, record) if site is not None and run else {}
    views = [verdict_view(v, i, record, withdrawn, suspects, spreads.get(str(v.get("id") or "")))
             for i, v in enumerate(verdicts)]
    headline = views[0] if views and not withdrawn else None
    prov = record.get("provenance") or {}
    hardware = str(prov.get("device") or "")
    return {
        "role": role, "label": label, "at": at, "present": run is not None, "owed": run is None or bool(withdrawn),
        "superseded": bool(withdrawn), "superseded_by": withdrawn["title"] if withdrawn else "",
        "profile": str(record.get("profile") or ""), "hardware": hardware,
        "date": str(record.get("executed_at") or "")[:10], "executed_at": str(record.get("executed_at") or ""),
        "commit": str(prov.get("git_sha") or "unknown") if run else "",
        "question": headline["question"] if headline else "",
        "answer": headline["answer"] if headline else "",
        "interval": headline["interval"] if headline else "", "device": headline["device"] if headline else hardware,
        "scale": card_scale(verdicts[0].get("scale"), hardware) if headline else "",
        "unsettled": bool(headline and headline["unsettled"]),
        "suspects": notes, "verdicts": views, "order": [w["index"] for w in views],
        "home": views[:HOME_VERDICTS], "more": max(0, len(views) - HOME_VERDICTS),
    }


def post_view(record: dict[str, Any], changelog: list[dict[str, Any]], freshness: str | None,
              gpu_planned: bool, site: Path | None = None) -> dict[str, Any]:
    """One post's card, banner and verdicts (see the module docstring), from its record's two runs
    (:func:`sidebyside.publish.records.split_runs`): ``runs``, the cpu run's :func:`run_view` then the
    GPU run's (this one only where the post's header plans a GPU section, ``gpu_planned``, or the record
    holds a GPU run). The card's headline, hardware and date are the first run shown (not owed), and the
    verdicts, order and home rows of the top-level fields are those of every run shown, the cpu run's
    first; a run that is owed shows none (where every run is owed, the card names the first run the
    record holds, with no figure); ``site``: where each run's log of re-runs is read (:func:`run_view`).
    Raises :class:`PublishError` for a run with more than :data:`MAX_VERDICTS` verdicts."""
    slug = str(record.get("slug"))
    cpu, gpu = records.split_runs({**record, "slug": slug})
    runs = [run_view(cpu, "cpu", changelog, site=site)]
    if gpu_planned or gpu is not None:
        runs.append(run_view(gpu, "gpu", changelog, records.GPU_RUN if cpu is not None else "", site=site))
    shown = [r for r in runs if not r["owed"]]
    lead = shown[0] if shown else next((r for r in runs if r["present"]), runs[0])
    lead_run = {"cpu": cpu, "gpu": gpu}[lead["role"]]
    since = _since(lead_run, changelog) if lead_run and shown else []
    views = [w for r in shown for w in r["verdicts"]]
    states = []
    if any(r["superseded"] for r in runs):
        states.append("superseded")
    if freshness == "stale" or since:
        states.append("stale")
    states += [f"{r['label']} owed" for r in runs if r["owed"]]
    states = states or ["current"]
    held = [k for k in KINDS if any(w["kind"] == k for w in views)]
    home = [w for r in shown for w in r["home"]][:HOME_VERDICTS]
    return {
        "slug": slug, "profile": lead["profile"], "hardware": lead["hardware"], "date": lead["date"],
        "executed_at": lead["executed_at"], "commit": lead["commit"] or "unknown", "states": states,
        "state": states[0], "freshness": freshness or "unknown",
        "question": lead["question"],
        "answer": lead["answer"] or ("no verdict in its results yet" if shown else "re-run owed: no figure shown"),
        "interval": lead["interval"], "device": lead["device"],
        "scale": lead["scale"], "unsettled": lead["unsettled"],
        "since": since, "since_kinds": [k for k in held if any(k in e["kinds"] for e in since)],  # those it shows
        "suspects": [n for r in shown for n in r["suspects"]],
        "verdicts": views, "home": home, "more": max(0, len(views) - len(home)), "kinds": held, "runs": runs,
    }


def board(site: Path, freshness: dict[str, str], gpu_owed: Collection[str], root: Path = ROOT) -> dict[str, Any]:
    """Every published record of ``site`` as :func:`post_view` sees it, the newest run first.
    ``gpu_owed``: the slugs whose header plans a GPU section (:func:`.schedule.gpu_sections`), so that
    such a post without a standing GPU run owes one; a post of no GPU section owes none."""
    changelog = load_changelog(site, root)
    posts = {}
    for path in sorted((Path(site) / "_data" / "results").glob("*.json")):
        record = json.loads(path.read_text())
        record.setdefault("slug", path.stem)
        posts[path.stem] = post_view(record, changelog, freshness.get(path.stem), path.stem in gpu_owed, site)
    newest = sorted(posts, key=lambda s: posts[s]["executed_at"], reverse=True)
    order = [s for s in newest if posts[s]["state"] != "superseded"] + [s for s in newest
                                                                        if posts[s]["state"] == "superseded"]
    return {"order": order, "kinds": list(KINDS), "posts": posts, "changelog": changelog}


def write_board(site: Path, freshness: dict[str, str], gpu_owed: Collection[str], root: Path = ROOT) -> Path:
    """Write :func:`board` to ``site/_data/board.json`` (atomically) and return its path."""
    path = Path(site) / "_data" / "board.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(board(site, freshness, gpu_owed, root), indent=2, ensure_ascii=False) + "\n")
    return path
