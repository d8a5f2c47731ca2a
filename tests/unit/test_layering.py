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


ROOT = DOMAIN.parent
PACKAGES = ("domain", "projections", "providers", "storage", "service", "engine", "api", "schedulers", "interchange",
            "ops", "tests")  # fmt: skip
MOST_LINES, MOST_LINES_IN_DOMAIN = 500, 400


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_outgrows_what_a_newcomer_reads_at_once(package: str) -> None:
    """A module past these sizes holds more than one thing a newcomer would look for: split it by what
    each part is for."""
    most = MOST_LINES_IN_DOMAIN if package == "domain" else MOST_LINES
    sizes = {str(p.relative_to(ROOT)): len(p.read_text("utf-8").splitlines()) for p in (ROOT / package).rglob("*.py")}
    assert not {path: n for path, n in sizes.items() if n > most}, f"longer than {most} lines"


def test_every_package_is_in_the_distribution() -> None:
    """A package left out of `[tool.setuptools] packages` is missing from a wheel (an editable install
    finds it all the same, so nothing else would tell)."""
    import tomllib

    from setuptools import find_packages

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"])
    found = set(find_packages(str(ROOT), include=[f"{p}*" for p in PACKAGES if p not in ("ops", "tests")]))
    assert not found - listed, "add to [tool.setuptools] packages"
    assert all((ROOT / name.replace(".", "/")).is_dir() for name in listed)  # (api.samples: data, no code)
