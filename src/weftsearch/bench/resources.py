"""What a rung costs the machine: CPU, major faults and peak resident set, read from ``/proc``.

Per rung the target's processes are measured: peak resident set (``VmHWM``
after resetting it through ``clear_refs`` where the kernel allows, and the
largest ``VmRSS`` sampled every 0.1 s by the driver), CPU seconds (user +
system) and major page faults. Linux only: elsewhere the figures are zeros.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

__all__ = ["ProcessResources", "descendants"]


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from ``/proc`` (Linux; elsewhere ``[pid]``). O(processes)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [pid]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        # The command name (field 2) may hold spaces and parentheses: the parent id follows the last ')'.
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, ()))
    return sorted(found)


def _proc_stat(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system) and major faults of ``pid`` so far, from ``/proc/PID/stat``."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # After the command: state(0) ppid ... majflt is field 12 of stat (index 9 here), utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / ticks, int(fields[9])


def _status_kb(pid: int, key: str) -> int:
    """The ``key`` line of ``/proc/PID/status`` in kB (0 when absent)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class ProcessResources:
    """CPU, faults and peak resident set of a set of processes over a rung."""

    def __init__(self, pids: Sequence[int]) -> None:
        """Reset the processes' peak (where allowed) and read their CPU and faults so far."""
        self.pids = list(pids)
        self.reset_ok = True
        for pid in self.pids:
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            except OSError:
                self.reset_ok = False
        self.start = {pid: _proc_stat(pid) for pid in self.pids}
        self.peak_kb = {pid: _status_kb(pid, "VmRSS") for pid in self.pids}

    def sample(self) -> None:
        """Fold each process's current resident set into its peak (a process that ended is skipped)."""
        for pid in self.pids:
            with suppress(OSError):
                self.peak_kb[pid] = max(self.peak_kb[pid], _status_kb(pid, "VmRSS"))

    def finish(self) -> tuple[float, float, int]:
        """(peak RSS MB summed over the processes, CPU seconds, major faults)."""
        self.sample()
        cpu = 0.0
        faults = 0
        peak = 0.0
        for pid in self.pids:
            try:
                now_cpu, now_faults = _proc_stat(pid)
                hwm = _status_kb(pid, "VmHWM") if self.reset_ok else 0
            except OSError:
                continue
            cpu += now_cpu - self.start[pid][0]
            faults += now_faults - self.start[pid][1]
            peak += max(self.peak_kb[pid], hwm) / 1024
        return peak, cpu, faults
