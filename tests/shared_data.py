"""External test data in shared/data (never copied into the repository): where it is on this machine."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def shared_data(name: str) -> Path:
    """`shared/data/<name>` beside the repository, or under $CHANGJI_SHARED, or /work/shared."""
    for root in (os.environ.get("CHANGJI_SHARED"), REPO.parent / "shared", "/work/shared"):
        if root and (path := Path(root) / "data" / name).exists():
            return path
    raise FileNotFoundError(f"shared/data/{name} not found: set CHANGJI_SHARED to the folder holding data/")


def cards_dir() -> Path:
    """SillyTavern's default cards (AGPL-3.0; fixtures only)."""
    return shared_data("cards")
