"""The `durability` command line: help, argument errors, refusing bad worker modules."""

from __future__ import annotations

import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from durability.cli import main
from durability.runtime import Runtime


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
    """`durability serve --help` documents MODULE, --path, --port, --host and --virtual-time."""
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("MODULE", "--path", "--port", "--host", "--virtual-time", ".durability", "8787"):
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
    """A module raising at import is one line at the user's frame, no traceback; exit 2."""
    module = tmp_path / "raises.py"
    module.write_text("import json\nraise RuntimeError('broken at import')\n")
    assert main(["serve", str(module)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert "raises.py:2: RuntimeError: broken at import" in err


def test_serve_reports_a_syntax_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module with a syntax error is one line naming its file and line."""
    module = tmp_path / "broken.py"
    module.write_text("x = 1\ndef f(:\n")
    assert main(["serve", str(module)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "broken.py:2: SyntaxError: " in err


def test_serve_reports_a_missing_dependency_at_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module importing a package that is not installed names the import line."""
    module = tmp_path / "needs.py"
    module.write_text("import durability_no_such_dependency\n")
    assert main(["serve", str(module)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "needs.py:1: ModuleNotFoundError: No module named 'durability_no_such_dependency'" in err


def test_serve_names_bindings_of_the_wrong_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bindings` that is not a dict is reported as the wrong type, not as missing."""
    module = tmp_path / "listed.py"
    module.write_text("bindings = ['COUNTERS']\nasync def fetch(request, env): ...\n")
    assert main(["serve", str(module)]) == 2
    err = capsys.readouterr().err
    assert "`bindings` must be a dict" in err
    assert "got list" in err
    assert "does not define" not in err


def _worker(tmp_path: Path) -> str:
    module = tmp_path / "worker.py"
    module.write_text("bindings = {}\nasync def fetch(request, env): ...\n")
    return str(module)


def test_serve_refuses_a_path_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --path that is a file is one line naming --path."""
    (tmp_path / "data").write_text("")
    assert main(["serve", _worker(tmp_path), "--path", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err == f"durability serve: --path {tmp_path / 'data'} is not a directory\n"


def test_serve_refuses_a_path_it_cannot_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --path under a file cannot be created: one line naming --path."""
    (tmp_path / "file").write_text("")
    assert main(["serve", _worker(tmp_path), "--path", str(tmp_path / "file" / "data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("durability serve: --path ")
    assert "cannot be created" in err


async def test_serve_refuses_a_path_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --path another Runtime holds is one line saying it is in use."""
    async with Runtime(path=tmp_path / "data"):
        assert main(["serve", _worker(tmp_path), "--path", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is in use by another Runtime" in err


def test_serve_refuses_a_port_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A port something already listens on is one line naming the port."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code = main(
            ["serve", _worker(tmp_path), "--path", str(tmp_path / "d"), "--port", str(port)]
        )
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"port {port} on 127.0.0.1 is in use" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`durability --version` prints the installed version."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"durability {version('durability-objects')}\n"


def test_python_dash_m_runs_the_command() -> None:
    """`python -m durability --version` works like the console script."""
    result = subprocess.run(
        [sys.executable, "-m", "durability", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("durability ")


def test_serve_reports_a_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist exits 2 with 'not found'."""
    assert main(["serve", "missing/worker.py"]) == 2
    assert "not found" in capsys.readouterr().err


def test_serve_rejects_a_bad_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A port outside 0-65535 exits 2 naming --port."""
    assert main(["serve", "examples/counter", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
