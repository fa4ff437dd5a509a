"""What every module of the publisher shares: the profiles, the project
root, the error a user can fix, and how the publisher speaks. Imports
nothing above it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["PROFILES", "ROOT", "TEMPLATES", "PublishError", "ANSI_RE", "say", "warn"]

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

