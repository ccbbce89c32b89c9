"""What the profiler measured (diagnostics.Profiler), as the tables people read and the file a
viewer opens.

    report = Report(profiler, sources)      sources: file name -> text (the source lines shown)
    report.table(top=15)                    time per source line and per builtin or operator,
                                            each split into forward and backward, with counts
    report.table(times=False)               the same tables without a time in them, rows ranked by
                                            the nodes recorded and then the runs (or calls): what a
                                            test or a docs page can print
    report.save("run.speedscope.json")      speedscope's file format (https://www.speedscope.app):
                                            a flame graph with the forward and the backward pass
                                            as separate frames under each line

Where the time goes: a line's forward time is the evaluator's own work on it plus the builtins
and operators it calls (a function's body counts on its own lines; the standard library counts
on the line that called it); a line's backward time is the VJPs of the nodes it recorded, and
for the line that called grad, the tape's own walk between VJPs. "Not on a line" is the rest:
start-up, parsing, loading the standard library.
"""
from __future__ import annotations

import json

from tapeml.array.diagnostics import BWD, FWD

NO_LINE = "(not on a line)"
CODE = "(tapeml code)"          # the evaluator's own work: names, loops, calls, assignments


class Report:
    def __init__(self, profiler, sources: dict | None = None):
        self.sources = sources or {}
        self.total = profiler.total if profiler.total is not None else sum(profiler.seconds.values())
        self.lines: dict = {}          # line key -> [fwd s, bwd s, runs, nodes]
        self.ops: dict = {}            # operation -> [fwd s, bwd s, calls, nodes]
        self.buckets = dict(profiler.seconds)
        self.unattributed = 0.0
        for (line, phase, op), s in profiler.seconds.items():
            if line is None:
                self.unattributed += s
                continue
            row = self.lines.setdefault(line, [0.0, 0.0, 0, 0])
            row[0 if phase == FWD else 1] += s
            orow = self.ops.setdefault(op or CODE, [0.0, 0.0, 0, 0])
            orow[0 if phase == FWD else 1] += s
        for line, n in profiler.runs.items():
            if line is not None:
                self.lines.setdefault(line, [0.0, 0.0, 0, 0])[2] += n
        for (line, phase, op), n in profiler.nodes.items():
            if line is not None:
                self.lines.setdefault(line, [0.0, 0.0, 0, 0])[3] += n
                self.ops.setdefault(op or CODE, [0.0, 0.0, 0, 0])[3] += n
        for (line, phase, op), n in profiler.calls.items():
            if line is not None and op is not None:
                self.ops.setdefault(op, [0.0, 0.0, 0, 0])[2] += n

    @property
    def ran(self) -> bool:
        """Whether any source line ran: code that did not parse (or an empty program) ran none, and
        the faces show no table of nothing, only the error."""
        return bool(self.lines)

    # ---- text -------------------------------------------------------------------------------
    def source_line(self, key) -> str:
        text = self.sources.get(key[0])
        if text is None:
            return ""
        lines = text.split("\n")
        return lines[key[1] - 1].strip() if 1 <= key[1] <= len(lines) else ""

    def _t(self, s, times):
        return "·" if not times else _seconds(s)

    def _share(self, s, times):
        return "·" if not times else "-" if s == 0 or self.total <= 0 else f"{100 * s / self.total:.1f}%"

    def table(self, top: int | None = 15, times: bool = True, width: int = 120) -> str:
        """The two tables as text (see the module's docstring); `top` rows each (None: all)."""
        out = []
        attributed = self.total - self.unattributed
        if times:
            out.append(f"profile: {_seconds(self.total)} in all, {self._share(attributed, True)} on "
                       f"source lines, {self._share(self.unattributed, True)} not on a line "
                       f"(start-up, parsing, loading the standard library)")
        else:
            out.append("profile (times left out; rows ranked by the nodes they recorded, then by runs or calls)")
        lines = list(self.lines.items())
        if times:
            lines.sort(key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))
        else:
            lines.sort(key=lambda kv: (-kv[1][3], -kv[1][2], kv[0]))
        shown = lines if top is None else lines[:top]
        out.append("")
        out.append(f"by source line ({_count(len(shown), len(lines), 'line')}):")
        where = [f"{k[0]}:{k[1]}" for k, _ in shown]
        wl = max([len(w) for w in where] + [4])
        head = (f"  {'line':<{wl}}  {'runs':>6}  {'forward':>9} {'share':>6}  {'backward':>9} "
                f"{'share':>6}  {'nodes':>7}  source")
        out.append(head)
        for w, (k, (f, b, runs, nodes)) in zip(where, shown):
            row = (f"  {w:<{wl}}  {runs:>6}  {self._t(f, times):>9} {self._share(f, times):>6}  "
                   f"{self._t(b, times):>9} {self._share(b, times):>6}  {nodes:>7}  ")
            out.append(row + _clip(self.source_line(k), width - len(row)))
        if times:
            out.append(f"  {NO_LINE:<{wl}}  {'':>6}  {_seconds(self.unattributed):>9} "
                       f"{self._share(self.unattributed, True):>6}")
        ops = list(self.ops.items())
        if times:
            ops.sort(key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))
        else:
            ops.sort(key=lambda kv: (-kv[1][3], -kv[1][2], kv[0]))
        shown_ops = ops if top is None else ops[:top]
        out.append("")
        out.append(f"by builtin and operator ({_count(len(shown_ops), len(ops), 'operation')}; "
                   f"{CODE} is the evaluator's own work):")
        ol = max([len(k) for k, _ in shown_ops] + [9])
        out.append(f"  {'operation':<{ol}}  {'calls':>6}  {'forward':>9} {'share':>6}  {'backward':>9} "
                   f"{'share':>6}  {'nodes':>7}")
        for k, (f, b, calls, nodes) in shown_ops:
            out.append(f"  {k:<{ol}}  {calls if k != CODE else '':>6}  {self._t(f, times):>9} "
                       f"{self._share(f, times):>6}  {self._t(b, times):>9} {self._share(b, times):>6}  "
                       f"{nodes:>7}")
        return "\n".join(out)

    # ---- speedscope ---------------------------------------------------------------------------
    def speedscope(self, name: str = "tapeml") -> dict:
        """speedscope's file format: a sampled profile whose samples are the buckets (stack:
        line, phase, operation) weighted by their seconds."""
        frames, index = [], {}

        def frame(key, **extra):
            if key not in index:
                index[key] = len(frames)
                frames.append({"name": key, **extra})
            return index[key]
        samples, weights = [], []
        for (line, phase, op), s in sorted(self.buckets.items(), key=lambda kv: _order(kv[0])):
            if s <= 0:
                continue
            if line is None:
                stack = [frame(NO_LINE)] + ([frame(op)] if op else [])
            else:
                text = self.source_line(line)
                top = frame(f"{line[0]}:{line[1]} {text}".rstrip(), file=str(line[0]), line=line[1])
                stack = [top, frame(phase), frame(op or CODE)]
            samples.append(stack)
            weights.append(s)
        return {"$schema": "https://www.speedscope.app/file-format-schema.json",
                "shared": {"frames": frames},
                "profiles": [{"type": "sampled", "name": name, "unit": "seconds", "startValue": 0,
                              "endValue": sum(weights), "samples": samples, "weights": weights}],
                "name": name, "activeProfileIndex": 0, "exporter": "tapeml"}

    def save(self, path: str, name: str = "tapeml") -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.speedscope(name), f)


def _order(bucket):
    line, phase, op = bucket
    return (line is None, line or ("", 0), phase != FWD, op or "")


def _seconds(s: float) -> str:
    if s == 0:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def _count(shown: int, total: int, what: str) -> str:
    s = "s" * (total != 1)
    return f"all {total} {what}{s}" if shown == total else f"top {shown} of {total} {what}{s}"


def _clip(text: str, room: int) -> str:
    room = max(room, 20)
    return text if len(text) <= room else text[:room - 3] + "..."


__all__ = ["Report", "BWD", "FWD"]
