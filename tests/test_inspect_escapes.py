"""`durability inspect` text mode: stored strings cannot drive the terminal."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    LogAppendInput,
    RetryPolicy,
)
from durability.cli import main
from durability.runtime import AlarmInvocationInfo, DurableObject
from durability.testing import VirtualClock

CLEAR_AND_TITLE = "\x1b[2J\x1b[H\x1b]0;owned\x07"
"""Clear the screen, home the cursor, set the window title (ending with BEL)."""
HOSTILE = f"evil{CLEAR_AND_TITLE}\b\b\r\x9b31m\u202ename\x7f\ttab\nline"
"""Escapes, backspaces, a carriage return, C1 CSI, a bidi override, DEL, a tab, a newline."""


class Hostile(DurableObject):
    """An object whose every stored string is hostile: name, ids, errors, consumers."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"charge": self.charge},
            retries=RetryPolicy(max_attempts=1),
        )
        self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers={HOSTILE: self.fire})
        self.log: DurabilityLog[Any] = DurabilityLog(scheduler=self.scheduler)

    async def charge(self, call: DurableCall) -> None:
        raise RuntimeError(f"declined {HOSTILE}")

    async def fire(self, info: DurableAlarmInfo) -> None:
        raise LookupError(HOSTILE)

    async def fill(self, now: int) -> None:
        await self.durability.charge(id=f"op-{HOSTILE}", payload=None)
        await self.alarms.named(HOSTILE)(now)
        await self.log.append([LogAppendInput({"n": 1})])
        await self.log.commit(f"reader-{HOSTILE}", 0)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


def _controls(text: str) -> set[str]:
    """The control, format and separator characters in `text`, newlines apart."""
    return {
        character
        for character in text
        if character != "\n" and unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp")
    }


async def test_text_mode_escapes_every_field_and_json_stays_exact(
    tmp_path: Path,
    clock: VirtualClock,
    capsys: pytest.CaptureFixture[str],
    make_runtime: MakeRuntime,
) -> None:
    """Names, ids, consumers and error texts print with control characters escaped
    (`\\x1b`, `\\x07`, ...) and on their own lines; `--json` keeps the exact strings."""
    async with make_runtime(path=tmp_path, bindings={"SHOPS": Hostile}) as rt:
        await rt.env.SHOPS.get_by_name(HOSTILE).fill(rt.now_ms())
        await clock.advance(60_000)
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert _controls(out) == set()
    assert out.startswith("SHOPS / evil\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\x08\\x08\\r\\x9b31m")
    assert "\\u202ename\\x7f\\ttab\\nline\n" in out
    assert "op-evil\\x1b[2J" in out
    assert "reader-evil\\x1b[2J" in out
    assert "RuntimeError: declined evil\\x1b[2J" in out
    assert "LookupError: evil\\x1b[2J" in out
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)["objects"]
    assert report["name"] == HOSTILE
    assert [alarm["name"] for alarm in report["named_alarms"]] == [HOSTILE]
    assert report["log"]["cursors"][0]["consumer"] == f"reader-{HOSTILE}"


def test_an_error_line_is_escaped_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The one-line error for a bad path shows the path with its controls escaped."""
    assert main(["inspect", str(tmp_path / f"missing{CLEAR_AND_TITLE}")]) == 1
    err = capsys.readouterr().err
    assert _controls(err) == set()
    assert err.count("\n") == 1
    assert "missing\\x1b[2J" in err
