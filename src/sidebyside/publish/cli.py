"""The publisher's command line, ``python -m sidebyside.publish`` (:func:`main`): ``execute``,
``render``, ``list``, ``plan``, ``readme`` (:mod:`sidebyside.publish.pipeline`), ``reproduce`` and ``aa``
(:mod:`sidebyside.publish.reproduce`), ``coverage`` (:mod:`sidebyside.publish.reruns`), ``merge``
(:mod:`sidebyside.publish.merge`), ``recover``,
``profile``, ``readme``, ``check-pairs`` and ``words`` (:mod:`sidebyside.publish.wordcount`).
Every command that reads parameters reads them from ``--params``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sidebyside.publish.common import ROOT, PublishError, say
from sidebyside.publish.discovery import check_pairs
from sidebyside.publish.params import detect_profile
from sidebyside.publish.pipeline import list_notebooks, plan_gpu_calls, rerender, run, write_readme
from sidebyside.publish.site import recover

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sidebyside.publish",
                                     description="From notebook to post: execution, cache, rendering, atomic publication.")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--only", help="comma-separated slugs (default: all)")
    common.add_argument("--site", type=Path, default=ROOT, help="site root holding _posts/, images/, _data/ (default: the repo)")
    common.add_argument("--build", type=Path, default=ROOT / "build", help="where executed notebooks go (default: build/)")
    common.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    common.add_argument("--params", type=Path, default=ROOT / "params", help="the folder of the posts' settings (<slug>.yaml)")
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
    sub.add_parser("coverage", parents=[common],
                   help="print the share of logged re-runs (_data/reruns/) whose estimate lies "
                        "inside the 95%% interval published before them, per post and overall")
    sub.add_parser("render", parents=[common], help="render published notebooks again from build/executed")
    listing = sub.add_parser("list", parents=[common], help="list notebooks, slugs and what is published")
    listing.add_argument("--freshness", action="store_true",
                         help="also write the answer into <site>/_data/freshness.json (the scoreboard's state)")
    sub.add_parser("words", parents=[common], help="print each published post's words (prose, "
                   "conclusion) and repeated sentences against the limits (exit 1: one is over)")
    sub.add_parser("recover", parents=[common], help="finish or roll back a publication that was interrupted")
    sub.add_parser("profile", help="print the profile this machine supports")
    planning = sub.add_parser("plan", parents=[common],
                              help="split the stale GPU posts into device calls (the gpu budgets of params/<slug>.yaml)")
    planning.add_argument("--all", action="store_true", help="plan every GPU post, current or not (one commit for all)")
    planning.add_argument("--call", type=int, help="print only the posts of this call (1, 2, ...), comma-separated")
    planning.add_argument("--posts", action="store_true", help="print the GPU posts to run as a JSON list, unpacked "
                          "(one runner per post, no call limit)")
    planning.add_argument("--limit-s", type=float, default=None,
                          help="device seconds a call may run, from its start (default: call_limit_s of "
                               "params/gpu-calls.yaml, 480)")
    planning.add_argument("--window-s", type=float, default=None,
                          help="device seconds all calls may take (default: window_s of params/gpu-calls.yaml, 800)")
    planning.add_argument("--max-calls", type=int, default=None,
                          help="calls in the window (default: max_calls of params/gpu-calls.yaml, 2)")
    planning.add_argument("--explain", action="store_true",
                          help="first print each post's budget, part by part, with where each figure comes from")
    planning.add_argument("--write", action="store_true",
                          help="also write the plan as gpu-runs/plan-<date>.json, the fixed plan a GPU box runs")
    merging = sub.add_parser("merge", parents=[common], help="render and publish the archives of GPU calls "
                             "(tools/device-run.sh: the executed notebooks and their records)")
    merging.add_argument("archives", nargs="+", type=Path, help="the gpu-run*.tgz of every call, and each call's "
                         "parts/ folder (the parts it finished, kept for the next call even where it was stopped)")
    merging.add_argument("--expect", help="comma-separated slugs that must be published (besides those planned)")
    merging.add_argument("--allow-missing", action="store_true", help="exit 0 when a post is missing (still reported)")
    merging.add_argument("--allow-stub", action="store_true", help="merge dry-run archives (a stub executor's)")
    readme = sub.add_parser("readme", help="write the README's table of posts from the notebooks' headers")
    readme.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    readme.add_argument("--check", action="store_true", help="write nothing; exit 1 when the table differs")
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
        if args.command == "coverage":
            from sidebyside.publish.reruns import coverage, coverage_text

            print(coverage_text(coverage(args.site)))
            return 0
        if args.command == "render":
            return rerender(only=args.only, site=args.site, build=args.build, notebooks=args.notebooks,
                            params_dir=args.params)
        if args.command == "words":
            from sidebyside.publish.wordcount import main as words

            return words(args.site, args.only)
        if args.command == "recover":
            from sidebyside.publish.site import lock

            with lock(args.site):
                said = recover(args.site)
            for message in said:
                say(f"recovered {message}")
            say(f"{args.site}: no publication was left unfinished" if not said else "done")
            return 0
        if args.command == "plan":
            return plan_gpu_calls(site=args.site, notebooks=args.notebooks, params_dir=args.params, only=args.only,
                                  everything=args.all, call=args.call, posts=args.posts, limit_s=args.limit_s,
                                  window_s=args.window_s, max_calls=args.max_calls, explain=args.explain,
                                  write=args.write)
        if args.command == "merge":
            from sidebyside.publish.merge import main_merge

            return main_merge(args.archives, site=args.site, notebooks=args.notebooks, expect=args.expect,
                              allow_missing=args.allow_missing, allow_stub=args.allow_stub, params_dir=args.params,
                              build=args.build)
        if args.command == "profile":
            print(detect_profile())
            return 0
        if args.command == "readme":
            return write_readme(ROOT / "README.md", args.notebooks, check=args.check)
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

