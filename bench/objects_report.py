"""bench/objects.py's fsync count (a child run under strace) and its tables."""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from objects_raw import MARK_ROOT

BATCH = 100
"""Concurrent callers of the creation row that has them."""
START_ROUNDS = 3
"""Starts measured per start row (the median is shown)."""


FsyncCounts = dict[str, dict[str, int]]
"""Per phase: fsync + fdatasync calls by kind of file (catalog, wal, journal, db, directory)."""


def count_fsyncs(args: argparse.Namespace) -> FsyncCounts | str:
    """The fsyncs of each phase, from a child run under strace; or why there are none."""
    strace = shutil.which("strace")
    if strace is None:
        return "not counted: strace is not installed"
    with tempfile.TemporaryDirectory(prefix="durability-fsync-", dir=args.dir) as tmp:
        trace = Path(tmp) / "trace.txt"
        command = [
            strace,
            "-f",
            "-qq",
            "-y",
            "--seccomp-bpf",
            "-e",
            "trace=fsync,fdatasync,access,faccessat,faccessat2",
            "-o",
            str(trace),
            sys.executable,
            str(Path(__file__).with_name("objects.py")),
            "--fsync-child",
            "--objects",
            str(args.fsync_objects),
            "--dir",
            tmp,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return f"not counted: the strace run failed ({done.stderr.strip()[-300:]})"
        return _parse_trace(trace.read_text())


def _parse_trace(text: str) -> FsyncCounts:
    counts: FsyncCounts = {}
    current: str | None = None
    marks = re.compile(re.escape(MARK_ROOT) + r"/([^/]+)/(begin|end)")
    syncs = re.compile(r"\b(?:fsync|fdatasync)\(\d+<([^>]*)>")
    for line in text.splitlines():
        found = marks.search(line)
        if found:
            current = found.group(1) if found.group(2) == "begin" else None
            continue
        synced = syncs.search(line)
        if current is None or synced is None:
            continue
        target = synced.group(1)
        if "_catalog.sqlite3" in target:
            kind = "catalog"
        elif target.endswith("-wal"):
            kind = "wal"
        elif target.endswith("-journal"):
            kind = "journal"
        elif target.endswith((".sqlite3", ".sqlite3-new")):
            kind = "db"
        else:
            kind = "directory"
        phase_counts = counts.setdefault(current, {})
        phase_counts[kind] = phase_counts.get(kind, 0) + 1
    return counts


def report(
    args: argparse.Namespace, fd_limit: int, results: dict[str, float], fsyncs: FsyncCounts | str
) -> None:
    """Print the tables of the phases that ran, and the notes."""
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(f"{versions}, WAL, every commit synced, {platform.machine()}, real clock, one run")
    if "raw-create" in results:
        report_objects(args, results, fsyncs)
    memory_table(args, fd_limit, results)
    if isinstance(fsyncs, str):
        print(f"fsyncs: {fsyncs}")
    else:
        print(
            f"fsyncs: a second run with {args.fsync_objects:,} objects under strace; "
            "fsync + fdatasync calls between phase marks, per item, by the file synced."
        )


def report_objects(
    args: argparse.Namespace, results: dict[str, float], fsyncs: FsyncCounts | str
) -> None:
    """The creation and deliveries table."""
    n = args.objects
    half = n // 2
    # The disk of a shared machine varies: raw is measured before and after durability's
    # deliveries, and the deliveries are compared with the mean of the two.
    raw_before = n / results["raw-commit-1"]
    raw_after = n / results["raw-commit-after"]
    raw_rate = (raw_before + raw_after) / 2
    raw_create_before = n / results["raw-create"]
    raw_create_after = n / results["raw-create-after"]
    raw_create_rate = (raw_create_before + raw_create_after) / 2
    fsync_items = {
        "raw-create": args.fsync_objects,
        "raw-commit-1": args.fsync_objects,
        "create-1": args.fsync_objects // 2,
        "create-100": args.fsync_objects - args.fsync_objects // 2,
        "deliver-live": args.fsync_objects,
        "deliver-restart": args.fsync_objects,
        "raw-reopen": args.fsync_objects,
    }

    def fsync_text(key: str) -> str:
        if isinstance(fsyncs, str) or key not in fsync_items:
            return ""
        kinds = fsyncs.get(key, {})
        total = sum(kinds.values()) / fsync_items[key]
        parts = ", ".join(
            f"{kind} {count / fsync_items[key]:.2f}" for kind, count in sorted(kinds.items())
        )
        return f"{total:.2f} ({parts})"

    rows = [
        (
            f"raw sqlite3: 1 row committed in each open file, in turn (mean of "
            f"{raw_before:,.0f} before and {raw_after:,.0f} after)",
            n,
            raw_rate,
            raw_rate,
            "raw-commit-1",
        ),
        (
            f"raw sqlite3: the same from {args.threads} threads",
            n,
            n / results["raw-commit-n"],
            raw_rate,
            "",
        ),
        (
            f"raw sqlite3: the runtime's 2 commits per delivery (row and retry marker, then "
            f"the marker cleared) in each open file, from {args.threads} threads",
            n,
            n / results["raw-two-commits-n"],
            raw_rate,
            "",
        ),
        (
            "durability: alarm() writes 1 row, objects live",
            n,
            n / results["deliver-live"],
            raw_rate,
            "deliver-live",
        ),
        (
            "durability: the same after a restart (hibernated, overdue)",
            n,
            n / results["deliver-restart"],
            raw_rate,
            "deliver-restart",
        ),
        (
            "raw sqlite3: open each closed file, commit 1 row (close untimed), in turn",
            n,
            n / results["raw-reopen"],
            raw_rate,
            "raw-reopen",
        ),
        (
            f"raw sqlite3: create file, table + 1 row in one commit (mean of "
            f"{raw_create_before:,.0f} before and {raw_create_after:,.0f} after)",
            n,
            raw_create_rate,
            raw_create_rate,
            "raw-create",
        ),
        (
            "durability: first call creates the object (table, alarm), 1 caller",
            half,
            1 / results["create-1"],
            raw_create_rate,
            "create-1",
        ),
        (
            f"durability: the same, {BATCH} concurrent callers",
            n - half,
            1 / results["create-100"],
            raw_create_rate,
            "create-100",
        ),
    ]
    print()
    print("| benchmark | n | per second | vs raw | fsyncs per item (by file) |")
    print("|---|---:|---:|---:|---:|")
    for label, count, rate, base, key in rows:
        print(f"| {label} | {count:,} | {rate:,.0f} | {rate / base:.2f}x | {fsync_text(key)} |")


def memory_table(args: argparse.Namespace, fd_limit: int, results: dict[str, float]) -> None:
    """The memory and start table."""
    kib = 1024
    live = f"{args.live:,}"
    lines = []
    if "live-rss" in results:
        lines += [
            (
                "raw sqlite3: RSS per open connection (WAL, 1 table, 1 row)",
                f"{args.objects:,}",
                f"{results['raw-rss'] / kib:,.1f} KiB",
            ),
            (
                "durability, live objects: RSS per object "
                f"(at most {results['open-cap']:,.0f} files open)",
                live,
                f"{results['live-rss'] / kib:,.1f} KiB "
                f"({results['total-live-rss'] / kib / kib:,.0f} MiB in all)",
            ),
            (
                "durability, live objects: Python heap per object (tracemalloc)",
                live,
                f"{results['live-traced'] / kib:,.1f} KiB",
            ),
            (
                "the same objects evicted (hibernated, alarm armed): RSS per object",
                live,
                f"{results['hibernated-rss'] / kib:,.1f} KiB",
            ),
            (
                "hibernated: Python heap per object (tracemalloc)",
                live,
                f"{results['hibernated-traced']:,.0f} bytes",
            ),
        ]
    for crashed, label in ((False, "after a clean close"), (True, "after a crash (no mark)")):
        if f"start-{crashed}" not in results:
            continue
        lines.append(
            (
                f"Runtime.start(), objects on disk each with an alarm armed, {label} "
                f"(median of {START_ROUNDS})",
                f"{args.start_objects:,}",
                f"{results[f'start-{crashed}'] * 1000:,.1f} ms (then first call "
                f"{results[f'first-call-{crashed}'] * 1000:,.1f} ms, "
                f"close {results[f'close-{crashed}'] * 1000:,.0f} ms)",
            )
        )
    if not lines:
        return
    print()
    print("| memory and start | n | result |")
    print("|---|---:|---:|")
    for label, count_text, text in lines:
        print(f"| {label} | {count_text} | {text} |")
    print()
    print("RSS is read after gc.collect() and malloc_trim(0); tracemalloc counts Python")
    print("allocations only (not SQLite's). An open object file holds 3 descriptors")
    print(f"(db, -wal, -shm); the open-file limit was raised to {fd_limit:,}.")
    print(f"The memory run's files are in {args.memory_dir} (to save time: no fsync wait there).")
