"""Only domain/application.py may touch eventsourcing's application and persistence modules, and no domain
module names one of its storage backends (import-linter cannot name parts of an outside package)."""

import ast
from pathlib import Path

import pytest

DOMAIN = Path(__file__).resolve().parents[2] / "domain"
STORE_MODULES = ("eventsourcing.application", "eventsourcing.persistence")
BACKENDS = ("eventsourcing.sqlite", "eventsourcing.postgres", "eventsourcing.popo")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # from eventsourcing import sqlite
    return names


MODULES = sorted(DOMAIN.rglob("*.py"))


@pytest.mark.parametrize(
    "path", [p for p in MODULES if p.name != "application.py"], ids=lambda p: str(p.relative_to(DOMAIN))
)
def test_domain_module_stays_off_the_event_store(path: Path) -> None:
    assert not {n for n in _imports(path) if n.startswith(STORE_MODULES)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(DOMAIN)))
def test_domain_module_names_no_storage_backend(path: Path) -> None:
    assert not {n for n in _imports(path) if n.startswith(BACKENDS)}


def test_application_is_the_module_that_uses_the_store() -> None:
    assert {n for n in _imports(DOMAIN / "application.py") if n.startswith(STORE_MODULES)}


def test_the_domain_is_walked_whole() -> None:
    assert {p.parent.name for p in MODULES} >= {"domain", "rules", "commands"}
