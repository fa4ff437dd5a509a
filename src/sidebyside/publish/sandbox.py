"""Every notebook run in an operating-system sandbox (bubblewrap): papermill and its kernel together.

:func:`run` starts :func:`child_command` (:func:`main`, the job as JSON: one papermill execution,
its outcome written to a file) as a child in a session of its own, inside ``bwrap`` where the
sandbox works (:func:`enabled`), and ends the whole run at its time limit. In the sandbox
(:func:`bwrap_argv`): the system, the interpreter, the checkout, the venv and the kernel's files
read-only; a private empty ``/tmp`` holding the home (:data:`HOME`) and Jupyter's runtime folder;
its own PID namespace (every process of the run ends with it), network namespace (loopback only,
what papermill and its kernel use) and IPC namespace; no capabilities; a minimal ``/dev``
(``/dev/nvidia*`` added where they exist), a fresh ``/proc``; an environment from an allowlist
(:func:`environment`). Writable: only what :class:`Box` names (the run's scratch, its staged
outputs, its caches).

``SIDEBYSIDE_SANDBOX`` (:data:`MODE_ENV`): ``auto`` (the default: sandboxed where ``bwrap`` runs,
else a plain child, with one warning), ``1`` (sandboxed, or an error), ``0`` (a plain child).
``SIDEBYSIDE_SANDBOX_ALLOW`` (:data:`ALLOW_ENV`), set by whoever starts the publisher and never
seen by the run: JSON ``{"read": [paths], "write": [paths], "env": [names], "share_net": bool}``,
what a harness's run needs beyond that (a test's Colab-like environment, which installs packages
and downloads from a server on this machine's loopback).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidebyside.lab import conditions
from sidebyside.run import checkpoints, colab, context

__all__ = ["MODE_ENV", "ALLOW_ENV", "HOME", "RUNTIME_DIR", "Box", "Finished", "probe", "enabled",
           "allowance", "environment", "bwrap_argv", "run", "execute_job", "main", "child_command"]

MODE_ENV = "SIDEBYSIDE_SANDBOX"
ALLOW_ENV = "SIDEBYSIDE_SANDBOX_ALLOW"
#: The run's home and Jupyter runtime folder: in its private ``/tmp``, empty at each start.
HOME = "/tmp/home"
RUNTIME_DIR = "/tmp/jupyter-runtime"
INSTALL = "apt-get install bubblewrap"

#: Variables a run keeps by name: the run context's and the library's (``sidebyside.run.context``,
#: ``run.checkpoints``, ``run.colab``, ``lab.conditions``, ``lab.pool``, ``grid_sample.native``),
#: locale, Python's and Jupyter's settings, the data's folder.
KEPT = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "MPLBACKEND", "PYDEVD_DISABLE_FILE_VALIDATION",
    "FASHION_MNIST_DIR", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONWARNINGS",
    "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONFAULTHANDLER", "VIRTUAL_ENV",
    "CXX", "JUPYTER_PATH", *context.ENV.values(), checkpoints.CALL_START_ENV,
    checkpoints.CALL_DEADLINE_ENV, checkpoints.ESTIMATES_ENV, checkpoints.LATER_ENV, checkpoints.COPY_ENV,
    conditions.CACHE_ENV, "SIDEBYSIDE_NATIVE_CACHE", "SIDEBYSIDE_POOL_CONDITIONS", colab.RAW_ENV,
})
#: Prefixes of variables a run keeps: locale, and those that set threads or the device.
KEPT_PREFIXES = ("LC_", "OMP_", "MKL_", "OPENBLAS_", "XLA_", "JAX_", "TORCH", "CUDA_", "NVIDIA_",
                 "TF_CPP_")
#: A kept name that looks like a secret is dropped all the same.
SECRET = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)


@dataclass
class Box:
    """What a sandboxed run sees: ``read`` (read-only, at their own paths), ``write`` (writable),
    ``moved`` (``{inside path: outside folder}``, writable, shown at ``inside``), ``cwd``, and
    ``share_net`` (this machine's network, for an allowance that asks for it)."""

    cwd: Path
    read: list[Path] = field(default_factory=list)
    write: list[Path] = field(default_factory=list)
    moved: dict[Path, Path] = field(default_factory=dict)
    share_net: bool = False


@dataclass(frozen=True)
class Finished:
    """How a run's child ended: its exit status, whether its limit stopped it, its seconds."""

    returncode: int
    timed_out: bool
    seconds: float


_PROBE = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
          "--unshare-net", "--unshare-ipc", "--cap-drop", "ALL", "--die-with-parent",
          "--new-session", "--", "true"]


@functools.cache
def probe(bwrap: str) -> str | None:
    """None where ``bwrap`` starts a sandbox with every feature a run uses, else why not (once a
    process)."""
    try:
        done = subprocess.run([bwrap, *_PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({bwrap}) could not start: {exc}"
    if done.returncode:
        said = done.stderr.strip() or f"exit status {done.returncode}"
        return f"bubblewrap ({bwrap}) cannot make a sandbox here: {said}"
    return None


@functools.cache
def _warn_unsandboxed(why: str) -> None:
    print(f"warning: notebook runs are NOT sandboxed: {why}. They can write this checkout, read "
          f"this environment and leave processes. To sandbox them: {INSTALL} (Linux, with user "
          f"namespaces or as root); {MODE_ENV}=0 says this is wanted and silences this warning.",
          file=sys.stderr, flush=True)


def enabled() -> bool:
    """Whether runs are sandboxed, from :data:`MODE_ENV` and :func:`probe`; with ``auto``, no
    sandbox is warned about once. Raises ValueError for a bad mode, or ``1`` without a sandbox."""
    mode = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if mode not in {"0", "1", "auto"}:
        raise ValueError(f"{MODE_ENV}={mode!r}: give 0 (no sandbox), 1 (a sandbox, or an error) "
                         "or auto")
    if mode == "0":
        return False
    found = shutil.which("bwrap")
    why = probe(found) if found else "bubblewrap (bwrap) is not installed"
    if why is None:
        return True
    if mode == "1":
        raise ValueError(f"{MODE_ENV}=1 asks for a sandbox, but {why}: {INSTALL}, or set "
                         f"{MODE_ENV}=auto")
    _warn_unsandboxed(why)
    return False


def allowance() -> dict[str, Any]:
    """:data:`ALLOW_ENV` read (see the module): ``read`` and ``write`` (Paths), ``env`` (names),
    ``share_net``. Raises ValueError saying what to give for anything else."""
    given = os.environ.get(ALLOW_ENV, "").strip()
    try:
        raw = json.loads(given) if given else {}
        if not isinstance(raw, dict) or set(raw) - {"read", "write", "env", "share_net"}:
            raise ValueError("an object with only read, write, env and share_net")
        return {"read": [Path(p) for p in raw.get("read", [])],
                "write": [Path(p) for p in raw.get("write", [])],
                "env": [str(n) for n in raw.get("env", [])],
                "share_net": bool(raw.get("share_net", False))}
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{ALLOW_ENV} is not what a run may be allowed ({exc}): give JSON such "
                         'as {"read": ["/data"], "write": [], "env": ["NAME"], "share_net": false}, '
                         "or unset it") from None


def environment(source: Mapping[str, str], extra_names: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``source`` a run keeps (:data:`KEPT`, :data:`KEPT_PREFIXES`, none that looks
    like a secret; and ``extra_names``), with ``HOME``, ``TMPDIR`` and ``JUPYTER_RUNTIME_DIR`` in
    the private ``/tmp``."""
    extra = set(extra_names)
    kept = {k: v for k, v in source.items()
            if k in extra or ((k in KEPT or k.startswith(KEPT_PREFIXES)) and not SECRET.search(k))}
    kept.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return {**kept, "HOME": HOME, "TMPDIR": "/tmp", "JUPYTER_RUNTIME_DIR": RUNTIME_DIR}


def _system() -> list[str]:
    """The host's system folders, read-only (a top-level link, as /lib to usr/lib, made again)."""
    args: list[str] = []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "sys"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def bwrap_argv(bwrap: str, box: Box, command: list[str]) -> list[str]:
    """The ``bwrap`` command line that runs ``command`` in ``box`` (see the module). Folders are
    mounted shallowest first, so that one inside another keeps its own kind (a writable one in the
    read-only checkout, a read-only one in an allowed writable one), and one named both ways is
    writable; the root is made read-only last."""
    args = [bwrap, "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL", "--die-with-parent",
            "--new-session"]
    if not box.share_net:
        args.append("--unshare-net")
    args += _system() + ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", HOME,
                         "--dir", RUNTIME_DIR]
    for device in sorted(Path("/dev").glob("nvidia*")):
        args += ["--dev-bind", str(device), str(device)]
    mounts = {("--ro-bind", p, p) for p in box.read if p.exists()}
    mounts |= {("--bind", p, p) for p in box.write}
    mounts |= {("--bind", outside, inside) for inside, outside in box.moved.items()}
    for how, outside, inside in sorted(mounts, key=lambda m: (len(m[2].parts), m[0] == "--bind",
                                                              m[2])):
        args += [how, str(outside), str(inside)]
    return args + ["--remount-ro", "/", "--chdir", str(box.cwd), "--", *command]


def _forward(stream, to: str) -> None:
    for line in iter(stream.readline, b""):
        target = sys.stdout if to == "out" else sys.stderr  # as redirected now, read at each line
        try:
            target.write(line.decode(errors="replace"))
            target.flush()
        except (OSError, ValueError):
            pass


def run(command: list[str], env: dict[str, str], limit: float) -> Finished:
    """Run ``command`` (a ``bwrap`` line, or a plain child) with ``env``, its output copied to this
    process's ``sys.stdout`` and ``sys.stderr``, in a session of its own; past ``limit`` seconds its
    process group is killed. At its end any process left in that group is killed too."""
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    copiers = [threading.Thread(target=_forward, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=_forward, args=(proc.stderr, "err"), daemon=True)]
    for copier in copiers:
        copier.start()
    timed_out = False
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        for copier in copiers:
            copier.join(timeout=5)
    return Finished(proc.returncode, timed_out, time.monotonic() - started)


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def _watch_cells(cell_file: Path) -> None:
    """Have papermill write each cell's index and source to ``cell_file`` as the cell starts."""
    from papermill.engines import NotebookExecutionManager

    started = NotebookExecutionManager.cell_start

    def cell_start(self, cell, cell_index=None, **kwargs):
        _write_json(cell_file, {"index": cell_index, "source": cell.get("source", "")})
        return started(self, cell, cell_index, **kwargs)

    NotebookExecutionManager.cell_start = cell_start


def execute_job(job: dict[str, Any]) -> dict[str, Any]:
    """One papermill execution as ``job`` says (``input``, ``output``, ``parameters``, ``kernel``,
    ``cwd``, ``progress``, ``timeout``, ``cell_file``). Returns its outcome: ``{"kind": "ok"}``;
    ``{"kind": "cell", ...}`` (a cell raised: its ``cell_index``, ``source``, ``ename``,
    ``evalue``); or ``{"kind": "error", "type", "message"}``."""
    import papermill

    _watch_cells(Path(job["cell_file"]))
    try:
        papermill.execute_notebook(job["input"], job["output"], parameters=job["parameters"],
                                   kernel_name=job["kernel"], cwd=job["cwd"],
                                   progress_bar=job["progress"], log_output=False,
                                   execution_timeout=job["timeout"])
    except papermill.PapermillExecutionError as exc:
        return {"kind": "cell", "cell_index": exc.cell_index, "source": exc.source,
                "ename": exc.ename, "evalue": str(exc.evalue)}
    except Exception as exc:  # reported to the parent, which says it as the publisher's error
        return {"kind": "error", "type": type(exc).__name__, "message": str(exc)}
    return {"kind": "ok"}


def main(argv: list[str]) -> int:
    """The run's child: ``argv[0]`` is the job as JSON (:func:`execute_job`'s, and ``outcome``:
    the file its outcome is written to)."""
    job = json.loads(argv[0])
    _write_json(Path(job["outcome"]), execute_job(job))
    return 0


def child_command(job: dict[str, Any]) -> list[str]:
    """The command line of a run's child (:func:`main`), this interpreter's."""
    entry = "import sys; from sidebyside.publish.sandbox import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", entry, json.dumps(job)]
