"""Only domain/application.py may touch eventsourcing's application and persistence modules."""

import ast
from pathlib import Path

import pytest

DOMAIN = Path(__file__).resolve().parents[2] / "domain"
STORE_MODULES = ("eventsourcing.application", "eventsourcing.persistence")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "path", sorted(p for p in DOMAIN.glob("*.py") if p.name != "application.py"), ids=lambda p: p.name
)
def test_domain_module_stays_off_the_event_store(path: Path) -> None:
    assert not {n for n in _imports(path) if n.startswith(STORE_MODULES)}


def test_application_is_the_module_that_uses_the_store() -> None:
    assert {n for n in _imports(DOMAIN / "application.py") if n.startswith(STORE_MODULES)}
