"""The publisher's commands: ``execute`` (:func:`run`), ``render``
(:func:`rerender`), ``list``, ``reproduce``
(:func:`sidebyside.publish.reproduce.reproduce`), ``profile``, ``check-pairs`` (:func:`main`), ``plan``
(:func:`plan_gpu_calls`), ``merge`` (:mod:`sidebyside.publish.merge`).
Every command that reads parameters reads them from ``--params``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sidebyside.publish.cache import freshness, plan, published_record
from sidebyside.publish.common import ROOT, PublishError, say
from sidebyside.publish.discovery import check_pairs, discover, read_notebook_info, select
from sidebyside.publish.guard import Guard
from sidebyside.publish.params import check_profile, detect_profile, load_all_params
from sidebyside.publish.rendering import check_date, render, site_config
from sidebyside.publish.running import check_before_running, complete_record, execute, key_and_stamp
from sidebyside.publish.site import completed_run, forget_run, holding_lock, publish, recover, write_run_record

__all__ = ["run", "rerender", "list_notebooks", "main"]


@holding_lock
def run(*, profile: str = "auto", only: str | None = None, force: bool = False, site: Path = ROOT,
        build: Path = ROOT / "build", notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params",
        root: Path = ROOT, progress: bool = True, dry_run: bool = False, aa: bool = False) -> int:
    """Execute (when needed) and publish notebooks. Returns a process exit code. ``aa``: an A/A
    run (every timed contestant races the first one's function), for a scratch site only. Each run
    is guarded (:class:`sidebyside.publish.guard.Guard`): a notebook that changed a published file
    fails with the files named, and they are put back."""
    started = time.perf_counter()
    if profile == "auto":
        profile = detect_profile()
        say(f"profile: {profile} (detected; PROFILE=smoke|cpu|gpu to choose)")
    check_profile(profile)
    everything = discover(notebooks)
    infos = select(everything, only)
    if not infos:
        raise PublishError(f"no notebooks found in {notebooks} (expected NN_topic.py files)")
    params_by_profile = load_all_params(params_dir, everything)
    if profile not in params_by_profile:
        raise PublishError(f"{params_dir / (profile + '.yaml')} is missing")
    for message in recover(site):
        say(f"recovered {message}")
    if not force:  # a forced run replaces every file of its posts: nothing to restore first
        from sidebyside.publish import state

        found = state.problems(site, [i.slug for i in infos], {i.slug: published_record(site, i.slug) for i in infos})
        if found:
            raise PublishError("the site is not whole; nothing was run:\n  " + "\n  ".join(found))
    decisions = plan(infos, profile, params_by_profile, site, force=force, root=root)
    config = site_config(site, root)
    if not dry_run and any(d.action == "run" for d in decisions):
        check_before_running(profile, root)
    for n, decision in enumerate(decisions, 1):
        info = decision.info
        label = f"[{n}/{len(decisions)}] {info.slug}"
        if decision.action != "run":
            say(f"{label}: {decision.action} ({decision.reason})")
            continue
        if dry_run:
            say(f"{label}: would run ({decision.reason})")
            continue
        check_date(info, config)
        say(f"{label}: running {info.relpath(root)} with the {profile} profile ({decision.reason}) ...")
        t0 = time.perf_counter()
        _, nb = read_notebook_info(info.path)
        params = params_by_profile[profile][info.slug]
        forget_run(build / "executed" / f"{info.slug}.ipynb")
        with Guard(site, info.slug) as guard:  # the run may write no published file, the publication only its own
            try:
                executed, saved = execute(info, nb, profile, params, build, root=root, progress=progress, aa=aa)
            finally:
                guard.check("its notebook's run")
            key, saved["provenance"]["git_sha"] = key_and_stamp(info, profile, params, params_dir, saved, root)
            record = complete_record(saved, info, profile, params, key, root)
            write_run_record(executed, record)
            import nbformat

            post, images = render(nbformat.read(executed, as_version=4), record, info, config, root=root)
            target = publish(site, info, post, images, record)
            guard.check("its publication", own=True)
        say(f"{label}: done in {time.perf_counter() - t0:.1f} s -> {target.relative_to(site)} "
             f"(+{len(images)} image{'s' if len(images) != 1 else ''})")
    if not dry_run:
        from sidebyside.publish import scoreboard

        scoreboard.write_freshness(site, infos, params_by_profile, root)
    say(f"all {len(decisions)} notebook(s) handled in {time.perf_counter() - started:.1f} s")
    return 0


@holding_lock
def rerender(*, only: str | None = None, site: Path = ROOT, build: Path = ROOT / "build",
             notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params", root: Path = ROOT) -> int:
    """Render the published runs again from ``build/executed`` (after a
    template change), keeping each published results record.

    Only a completed run is rendered, and only the one that is published:
    the executed copy's run record (:func:`completed_run`) must
    match the published record (profile, commit, key, time). Anything else
    is refused before anything is written, with what to run instead."""
    import nbformat

    config = site_config(site, root)
    for message in recover(site):
        say(f"recovered {message}")
    jobs, refused = [], []
    for info in select(discover(notebooks), only):
        executed = build / "executed" / f"{info.slug}.ipynb"
        rerun = f"run `make execute ONLY={info.slug}` instead"
        try:
            published = published_record(site, info.slug)
        except PublishError as exc:
            refused.append(f"{info.slug}: {exc}")
            continue
        if published is None:
            refused.append(f"{info.slug}: nothing is published to render again; {rerun}")
            continue
        ran, why = completed_run(executed)
        if ran is None:
            refused.append(f"{info.slug}: {why}; {rerun}")
            continue
        differ = [name for name, get in (("profile", lambda r: r.get("profile")),
                                         ("commit", lambda r: (r.get("provenance") or {}).get("git_sha")),
                                         ("key", lambda r: r.get("source_hash")),
                                         ("time", lambda r: r.get("executed_at"))) if get(ran) != get(published)]
        if differ:
            refused.append(
                f"{info.slug}: {executed} holds the {ran.get('profile')} run of {ran.get('executed_at')}, but the "
                f"published result is the {published['profile']} run of {published['executed_at']} (they differ in "
                f"{', '.join(differ)}); render only renders the published run again: {rerun} "
                f"(with FORCE=1 to replace a larger profile)")
            continue
        jobs.append((info, executed, published))
    if refused:
        raise PublishError("render refused; nothing was changed:\n  " + "\n  ".join(refused))
    for info, executed, record in jobs:
        check_date(info, config)
        post, images = render(nbformat.read(executed, as_version=4), record, info, config, root=root)
        say(f"{info.slug}: rendered -> {publish(site, info, post, images, record).relative_to(site)}")
    from sidebyside.publish import scoreboard

    everything = discover(notebooks)
    scoreboard.write_freshness(site, select(everything, only), load_all_params(params_dir, everything), root)
    return 0


def list_notebooks(*, only: str | None = None, site: Path = ROOT, notebooks: Path = ROOT / "notebooks",
                   params_dir: Path = ROOT / "params", root: Path = ROOT, write_freshness: bool = False) -> int:
    """Print each notebook, its slug and what is published (current or stale,
    by :func:`sidebyside.publish.cache.freshness` with the parameters of
    ``params_dir``). Returns 2 when a published record is broken, a post's
    files are incomplete or a publication was left unfinished
    (:mod:`sidebyside.publish.state`; each is said on stderr with its fix), or when Jekyll would refuse to
    load a data file or a post's front matter (:func:`sidebyside.publish.records.site_rejects`). With
    ``write_freshness`` (``make site``), also write the answer into the
    site's ``_data/freshness.json`` for the home page's scoreboard."""
    from sidebyside.publish import records, state

    everything = discover(notebooks)
    params_by_profile = load_all_params(params_dir, everything)
    unfinished = state.unfinished(site)  # read-only: `recover` (or execute, render) finishes or rolls them back
    for message in unfinished:
        print(f"error: {message}", file=sys.stderr)
    broken = len(unfinished)
    for info in select(everything, only):
        try:
            record = published_record(site, info.slug)
        except PublishError as exc:
            print(f"{info.slug:31} {info.relpath(root):38} BROKEN (see below)")
            print(f"error: {exc}", file=sys.stderr)
            broken += 1
            continue
        missing = state.incomplete(site, info.slug, record)
        if missing:
            print(f"{info.slug:31} {info.relpath(root):38} INCOMPLETE (see below)")
            print(f"error: {missing}", file=sys.stderr)
            broken += 1
            continue
        said_state = "not published"
        if record:
            current, _ = freshness(info, record, params_by_profile, root)
            said = {True: "current", False: "stale: its inputs changed since",
                    None: f"unknown: no {params_dir}/{record.get('profile')}.yaml"}[current]
            said_state = f"{record['profile']} run of {record['executed_at']} ({said})"
        print(f"{info.slug:31} {info.relpath(root):38} {said_state}")
    for message in records.site_rejects(site):  # what Jekyll itself would refuse, whichever post it is
        print(f"error: Jekyll would refuse to load {message}; the whole site would fail to build. Run "
              "`make execute ONLY=<its slug> FORCE=1` (or `git checkout -- <file>`) to replace it", file=sys.stderr)
        broken += 1
    if write_freshness and not broken:
        from sidebyside.publish import scoreboard

        scoreboard.write_freshness(site, select(everything, only), params_by_profile, root)
    return 2 if broken else 0


def plan_gpu_calls(args: argparse.Namespace) -> int:
    """The ``plan`` command: the calls (:mod:`sidebyside.publish.schedule`), or with ``--call N`` that call's
    posts alone, comma-separated, one per run (empty when there is no such call), or with ``--posts`` the
    posts to run, unpacked, as a JSON list."""
    import json

    from sidebyside.publish import schedule

    budgets = schedule.read_budgets(args.params / "gpu.yaml")
    slugs, params, notes = schedule.stale_gpu_posts(budgets, site=args.site, notebooks=args.notebooks,
                                                    params_dir=args.params, everything=args.all, only=args.only)
    if args.posts:
        print(json.dumps(slugs))
        return 0
    planned = schedule.plan_calls(budgets, params, slugs, root=args.site, limit_s=args.limit_s,
                                  window_s=args.window_s, max_calls=args.max_calls)
    if args.call is not None:
        calls = planned.calls
        print(",".join(calls[args.call - 1].slugs) if 1 <= args.call <= len(calls) else "")
        return 0
    for note in notes:
        say(f"note: {note}")
    say(schedule.format_plan(planned))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sidebyside.publish",
                                     description="From notebook to post: execution, cache, rendering, atomic publication.")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--only", help="comma-separated slugs (default: all)")
    common.add_argument("--site", type=Path, default=ROOT, help="site root holding _posts/, images/, _data/ (default: the repo)")
    common.add_argument("--build", type=Path, default=ROOT / "build", help="where executed notebooks go (default: build/)")
    common.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    common.add_argument("--params", type=Path, default=ROOT / "params", help="the folder of {smoke,cpu,gpu}.yaml")
    ex = sub.add_parser("execute", parents=[common], help="run notebooks that need it and publish them")
    ex.add_argument("--profile", default="auto", help="smoke, cpu, gpu or auto (gpu where a CUDA device is seen)")
    ex.add_argument("--force", action="store_true", help="run even if up to date or a larger profile is published")
    ex.add_argument("--dry-run", action="store_true", help="say what would run, run nothing")
    ex.add_argument("--no-progress", action="store_true", help="no per-cell progress bar")
    again = sub.add_parser("reproduce", parents=[common],
                           help="run --only <slug> here into build/reproduce/ and compare its speed verdicts with the "
                                "published ones (exit 1: one does not reproduce on the same hardware)")
    again.add_argument("--profile", default=None, help="default: the profile of the published run")
    again.add_argument("--scratch", type=Path, default=None, help="where the run goes (default: build/reproduce/)")
    same = sub.add_parser("aa", parents=[common],
                          help="run --only <slug> here into build/aa/ racing every timed contestant against itself "
                               "(A/A) and count the speed verdicts that find a winner")
    same.add_argument("--profile", default=None, help="default: the profile of the published run, else cpu")
    same.add_argument("--scratch", type=Path, default=None, help="where the run goes (default: build/aa/)")
    sub.add_parser("render", parents=[common], help="render published notebooks again from build/executed")
    listing = sub.add_parser("list", parents=[common], help="list notebooks, slugs and what is published")
    listing.add_argument("--freshness", action="store_true",
                         help="also write the answer into <site>/_data/freshness.json (the scoreboard's state)")
    sub.add_parser("recover", parents=[common], help="finish or roll back a publication that was interrupted")
    sub.add_parser("profile", help="print the profile this machine supports")
    planning = sub.add_parser("plan", parents=[common],
                              help="split the stale GPU posts into device calls (params/gpu.yaml's #budget lines)")
    planning.add_argument("--all", action="store_true", help="plan every GPU post, current or not (one commit for all)")
    planning.add_argument("--call", type=int, help="print only the posts of this call (1, 2, ...), comma-separated")
    planning.add_argument("--posts", action="store_true", help="print the GPU posts to run as a JSON list, unpacked "
                          "(one runner per post, no call limit)")
    planning.add_argument("--limit-s", type=float, default=540.0, help="device seconds a call may take (540)")
    planning.add_argument("--window-s", type=float, default=1500.0, help="device seconds all calls may take (1500)")
    planning.add_argument("--max-calls", type=int, default=3, help="calls in the window (3)")
    merging = sub.add_parser("merge", parents=[common], help="publish the archives of GPU calls (tools/device-run.sh)")
    merging.add_argument("archives", nargs="+", type=Path, help="the gpu-run*.tgz of every call")
    merging.add_argument("--expect", help="comma-separated slugs that must be published (besides those planned)")
    merging.add_argument("--allow-missing", action="store_true", help="exit 0 when a post is missing (still reported)")
    merging.add_argument("--allow-stub", action="store_true", help="merge dry-run archives (a stub publisher's)")
    pairs = sub.add_parser("check-pairs", help="fail if a .ipynb pair is missing, stale or holds outputs")
    pairs.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    args = parser.parse_args(argv)
    try:
        if args.command == "execute":
            return run(profile=args.profile, only=args.only, force=args.force, site=args.site, build=args.build,
                       notebooks=args.notebooks, params_dir=args.params, progress=not args.no_progress,
                       dry_run=args.dry_run)
        if args.command == "reproduce":
            from sidebyside.publish.reproduce import SCRATCH, reproduce

            return reproduce(only=args.only, profile=args.profile, site=args.site, scratch=args.scratch or SCRATCH,
                             notebooks=args.notebooks, params_dir=args.params)
        if args.command == "aa":
            from sidebyside.publish.reproduce import AA_SCRATCH, aa

            return aa(only=args.only, profile=args.profile, site=args.site, scratch=args.scratch or AA_SCRATCH,
                      notebooks=args.notebooks, params_dir=args.params)
        if args.command == "render":
            return rerender(only=args.only, site=args.site, build=args.build, notebooks=args.notebooks,
                            params_dir=args.params)
        if args.command == "recover":
            from sidebyside.publish.site import lock

            with lock(args.site):
                said = recover(args.site)
            for message in said:
                say(f"recovered {message}")
            say(f"{args.site}: no publication was left unfinished" if not said else "done")
            return 0
        if args.command == "plan":
            return plan_gpu_calls(args)
        if args.command == "merge":
            from sidebyside.publish.merge import main_merge

            return main_merge(args.archives, site=args.site, notebooks=args.notebooks, expect=args.expect,
                              allow_missing=args.allow_missing, allow_stub=args.allow_stub)
        if args.command == "profile":
            print(detect_profile())
            return 0
        if args.command == "check-pairs":
            problems = check_pairs(args.notebooks)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1 if problems else 0
        return list_notebooks(only=args.only, site=args.site, notebooks=args.notebooks, params_dir=args.params,
                              write_freshness=args.freshness)
    except PublishError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: no post is left half published (a publication under way was rolled back, or the next "
              "run rolls it back or completes it and says which); `make render` will not publish an interrupted run",
              file=sys.stderr)
        return 130

