"""``sezzlee/cli.py``: the subcommands and their refusals. Each subcommand's own flags
are its command line's (tests/indexer/test_cli.py, tests/server/test_main.py)."""

from __future__ import annotations

import pytest

from sezzlee.cli import main


def test_no_command_prints_the_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "serve --stdio --specs DIR" in capsys.readouterr().out


def test_help_prints_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    said = capsys.readouterr().out
    for command in ("index", "serve", "run", "explain QUERY", "model install", "model check"):
        assert f"  {command}" in said


@pytest.mark.parametrize("argv", [["explain"], ["model"], ["model", "fetch"], ["bogus"]])
def test_an_unknown_or_incomplete_command_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("usage: sezzlee")


@pytest.mark.parametrize("command", ["index", "serve"])
def test_a_commands_help_is_its_own_command_lines(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert "--index" in capsys.readouterr().out


def test_serve_stdio_needs_a_spec_directory(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["serve", "--stdio"])
    assert done.value.code == 2
    assert "--specs" in capsys.readouterr().err
