"""The `durability` command line: help, argument errors, refusing bad worker modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from durability.cli import main


def test_no_arguments_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    """`durability` alone prints the help, listing serve, and exits 0."""
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: durability" in out
    assert "serve" in out


def test_console_script_is_installed() -> None:
    """The installed `durability` entry point runs main."""
    script = Path(sys.executable).with_name("durability")
    result = subprocess.run([str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "serve" in result.stdout


def test_serve_help_lists_options(capsys: pytest.CaptureFixture[str]) -> None:
    """`durability serve --help` documents MODULE, --path, --port and --host."""
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("MODULE", "--path", "--port", "--host", ".durability", "8787"):
        assert option in out


def test_serve_refuses_a_module_without_fetch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module without fetch gets a clear message and exit code 2, before any server."""
    module = tmp_path / "no_fetch.py"
    module.write_text("bindings = {}\n")
    assert main(["serve", str(module), "--path", str(tmp_path / "data")]) == 2
    assert "does not define `async def fetch(request, env)`" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_serve_refuses_a_module_without_bindings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module without a bindings dict gets a clear message and exit code 2."""
    module = tmp_path / "no_bindings.py"
    module.write_text("async def fetch(request, env): ...\n")
    assert main(["serve", str(module)]) == 2
    assert "does not define `bindings`" in capsys.readouterr().err


def test_serve_reports_a_module_that_fails_to_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module raising at import shows its traceback and exits 2."""
    module = tmp_path / "raises.py"
    module.write_text("raise RuntimeError('broken at import')\n")
    assert main(["serve", str(module)]) == 2
    err = capsys.readouterr().err
    assert "broken at import" in err
    assert "importing" in err


def test_serve_reports_a_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist exits 2 with 'not found'."""
    assert main(["serve", "missing/worker.py"]) == 2
    assert "not found" in capsys.readouterr().err


def test_serve_rejects_a_bad_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A port outside 0-65535 exits 2 naming --port."""
    assert main(["serve", "examples/counter", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
