"""`durability check`: before a deploy, the stored pending work the new code cannot run.

`probe` loads the new code as `serve` does and builds one object of each class in
memory to learn what each capability declares; `capabilities` is the interface through
which each capability (operations, named alarms and recurrences, fanout targets)
lists its pending items and judges them against their handlers (`payloads` judges a
payload against a declared type); `schema` plans the migrations; `check` walks the data
read-only; `command` prints the report and picks the exit code.
"""

from __future__ import annotations

from .capabilities import CAPABILITIES, Capability
from .check import CheckReport, check_path
from .command import run
from .findings import Finding, Pending

__all__ = ["CAPABILITIES", "Capability", "CheckReport", "Finding", "Pending", "check_path", "run"]
