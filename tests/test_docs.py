"""Docs that run: every ```python block of README.md and docs/*.md is a whole program.

Each block runs as it is shown, in a fresh temporary directory, with a timeout. A block
whose first line names a file (`# greeter.py`) is that file: the page's later blocks
find it beside them, as a reader who saved it would. A file named `test_*.py` runs
under pytest, with the page's `# pyproject.toml` block (if any) beside it, as in a
user's project. Fragments use a ```py fence and are not run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import MakeRuntime
from durability.runtime import Request
from durability.runtime.server import load_worker
from test_pytest_plugin import AS_A_USER

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT_S = 120

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_FILE = re.compile(r"# (\w+\.py)\n")
_PRIVATE = re.compile(r"API\.md|\bspec/|\bseeds/|\.\./shared")
_WARNING = re.compile(r"\w+Warning\b|warnings summary")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, language, first line number and text."""

    page: Path
    language: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(page: Path) -> list[Block]:
    source = page.read_text()
    return [
        Block(page, match[1], source.count("\n", 0, match.start()) + 1, match[2])
        for match in _FENCE.finditer(source)
    ]


PROGRAMS = [block for page in PAGES for block in _blocks(page) if block.language == "python"]


@pytest.mark.parametrize("block", PROGRAMS, ids=[block.id for block in PROGRAMS])
def test_python_block_runs_as_shown(block: Block, tmp_path: Path) -> None:
    """The block runs to completion (exit 0) as a program or, if named test_*.py, under pytest."""
    for earlier in _blocks(block.page):
        named = _FILE.match(earlier.text)
        if earlier.language == "python" and earlier.line < block.line and named:
            (tmp_path / named[1]).write_text(earlier.text)
    named = _FILE.match(block.text)
    file = named[1] if named else "example.py"
    (tmp_path / file).write_text(block.text)
    command = [sys.executable, file]
    if file.startswith("test_"):
        config = _config_block(block.page)
        if config is not None:
            (tmp_path / "pyproject.toml").write_text(config)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *AS_A_USER, file]
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert result.returncode == 0, f"{block.id} failed:\n{result.stdout}\n{result.stderr}"
    if file.startswith("test_"):
        # The documented setup must run clean: a warning on every run teaches users to
        # ignore warnings.
        output = result.stdout + result.stderr
        assert not _WARNING.search(output), f"{block.id} warns:\n{output}"


def _config_block(page: Path) -> str | None:
    for block in _blocks(page):
        if block.language == "toml" and block.text.startswith("# pyproject.toml\n"):
            return block.text
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_page_is_self_contained(page: Path) -> None:
    """A page refers to nothing users do not have (no internal design documents)."""
    assert _PRIVATE.findall(page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_local_links_resolve(page: Path) -> None:
    """Every relative link of a page points at a file of the project."""
    targets = [t for t in _LINK.findall(page.read_text()) if "://" not in t]
    assert [t for t in targets if not (page.parent / t).exists()] == []


def _anchors(page: Path) -> set[str]:
    """The ids the docs site gives the headings of a page (lowercase words joined by -)."""
    source = _FENCE.sub("", page.read_text())
    headings = re.findall(r"^#+ (.+)$", source, re.MULTILINE)
    return {re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", h).strip().lower()) for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_local_link_anchors_resolve(page: Path) -> None:
    """Every `page.md#section` link names a heading the target page has."""
    links = re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", _FENCE.sub("", page.read_text()))
    broken = [
        f"{target}#{anchor}"
        for target, anchor in links
        if "://" not in target and anchor not in _anchors(page.parent / target if target else page)
    ]
    assert broken == []


async def test_getting_started_app_answers_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_runtime: MakeRuntime
) -> None:
    """The tutorial's served `app.py` greets the name in the URL path, as curl would ask."""
    page = ROOT / "docs" / "getting-started.md"
    for block in _blocks(page):
        named = _FILE.match(block.text)
        if block.language == "python" and named:
            (tmp_path / named[1]).write_text(block.text)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        worker = load_worker(str(tmp_path / "app.py"))
        async with make_runtime(bindings=worker.bindings) as rt:
            response = await worker.fetch(Request("http://localhost:8787/alice"), rt.env)
    finally:
        for module in ("app", "greeter"):
            sys.modules.pop(module, None)
    assert await response.bytes() == b"hello alice, visit number 1"
