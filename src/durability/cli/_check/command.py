"""`durability check DATA --worker WORKER [--json]`: the report as text or JSON, and its
exit code (0 nothing found, 1 findings, 2 bad arguments)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .._inspect import InspectError
from .._terminal import printable
from .check import CheckReport, check_path

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def run(data: str, worker: str, as_json: bool) -> int:
    """Check `data` against `worker`; print the report; the exit code."""
    from ...runtime.server import WorkerModuleError
    from .probe import declared, load

    path = Path(data)
    if not path.is_dir():
        return _fail(f"{data}: no such directory (expected a runtime's data folder)")
    try:
        module = load(worker)
    except WorkerModuleError as error:
        return _fail(str(error))
    except Exception as error:
        return _fail(f"cannot load {worker}: {type(error).__name__}: {error}")
    try:
        report = check_path(path, module, declared(module))
    except InspectError as error:
        return _fail(str(error))
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render(report), end="")
    return EXIT_FINDINGS if report.findings else EXIT_CLEAN


def render(report: CheckReport) -> str:
    """The report as text: one line per finding, then the migrations that would apply."""
    lines = [
        f"{report.path}: {report.objects} objects, {report.pending} pending items, "
        f"{len(report.findings)} findings"
    ]
    for finding in report.findings:
        who = finding.object if finding.object is not None else finding.object_id[:12] or "-"
        lines.append(
            f"  {finding.kind}: {finding.namespace or '-'} / {who}  {finding.what} "
            f"{finding.handler} {finding.id}: {finding.detail}"
        )
    if report.applies:
        lines.append("migrations the new code would apply:")
        for entry in report.applies:
            assert isinstance(entry, dict)
            if "project" in entry:
                lines.append(f"  {entry['project']}")
            else:
                label = str(entry["object"] or str(entry["object_id"])[:12])
                migrations = entry["migrations"]
                assert isinstance(migrations, list)
                lines.append(
                    f"  {entry['namespace']} / {label}  {entry['capability']}: "
                    f"{', '.join(map(str, migrations))}"
                )
    return "".join(f"{printable(line)}\n" for line in lines)


def _fail(message: str) -> int:
    print(f"durability check: {printable(message)}", file=sys.stderr)
    return EXIT_USAGE
