"""What every module of the publisher shares: the profiles, the project
root, the error a user can fix, how the publisher speaks and how it
replaces a file. Imports nothing above it."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

__all__ = ["PROFILES", "ROOT", "TEMPLATES", "PublishError", "ANSI_RE", "say", "warn", "write_atomic"]

PROFILES = ("smoke", "cpu", "gpu")  # ordered: a larger profile is never replaced by a smaller one
ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


class PublishError(Exception):
    """A problem the user can fix; the message says what to do."""


def say(message: str) -> None:
    print(message, flush=True)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text as UTF-8) so that a reader sees the
    old file or the new one, never part of either: written to ``.<name>.tmp``
    beside it, flushed to disk, then renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
