"""The command line tells what it is: its version from the package's metadata, a line of help for every
command and subcommand."""

from __future__ import annotations

from importlib.metadata import version

import click
from click.testing import CliRunner

from api.cli import main


def test_the_version_is_the_packages() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"changji, version {version('changji')}"


def test_every_command_and_subcommand_has_a_line_of_help() -> None:
    def commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
        found = []
        for name, command in group.commands.items():
            found.append((f"{prefix}{name}", command))
            if isinstance(command, click.Group):
                found += commands(command, f"{prefix}{name} ")
        return found

    listed = commands(main, "")
    assert len(listed) >= 10
    assert [name for name, command in listed if not (command.help or "").strip()] == []
    assert [
        (name, option.name) for name, command in listed for option in command.params
        if isinstance(option, click.Option) and not option.hidden and not option.help
        and option.name not in ("tenant", "limit", "from_depth", "host", "port")  # (their names say it)
    ] == []  # fmt: skip
