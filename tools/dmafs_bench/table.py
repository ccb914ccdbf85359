# SPDX-License-Identifier: MIT
"""table - the one table layout of every dmafs-bench mode, and its goals and ratios.

A report is a title line ("dmafs-bench MODE: what was measured"), lines saying what the
figures are, one or more tables, and a final verdict line. A table is a header line and
rows of aligned columns, two spaces apart: the first column (and the result and note
columns) left-aligned, the others right-aligned; a "note" column comes last and is not
padded. Where a row has a goal, its last columns are the ratio ("1.23x"), the goal
(">= 1.00x") and the result (MEETS or MISSES); the verdict line counts them. The values
are what was measured; nothing is adjusted, and the exit status does not depend on them.
"""

import statistics
import sys

MEETS, MISSES = "MEETS", "MISSES"


class Goal:
    """A ratio's goal: at least (or, with @at_most, at most) @target; with @lo, from @lo to
    @target. With @count the value is a count (printed as a whole number, no "x"). @what
    says what the value is, for --help and the manual page."""

    def __init__(self, what, target, at_most=False, lo=None, count=False):
        self.what, self.target, self.at_most = what, target, at_most
        self.lo, self.count = lo, count

    def met(self, value):
        if value is None:
            return False
        if self.lo is not None:
            return self.lo <= value <= self.target
        return value <= self.target if self.at_most else value >= self.target

    def show(self, value):
        """The value as printed."""
        if self.count:
            return "n/a" if value is None else f"{value:d}"
        return times(value)

    def __str__(self):
        if self.lo is not None:
            return f"{self.lo:.2f}x to {self.target:.2f}x"
        if self.count:
            return f"{'<=' if self.at_most else '>='} {self.target:d}"
        return f"{'<=' if self.at_most else '>='} {self.target:.2f}x"


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    if a is None or b is None or not b:
        return None
    return a / b


def times(r):
    """A ratio as printed: 1.23x, or n/a."""
    return "n/a" if r is None else f"{r:.2f}x"


def median(values):
    return statistics.median(values) if values else None


def cell(v, fmt="{:.3f}"):
    """A figure as printed: formatted, or empty when missing."""
    return "" if v is None else fmt.format(v)


LEFT = ("result", "note")


class Table:
    """Rows of cells under a header line. @widths fixes minimum column widths so that
    rows can be printed one by one as they are measured (line()); render() sizes the
    columns to their cells."""

    def __init__(self, *heads, left=(), widths=None):
        self.heads = list(heads)
        self.left = {0} | {i for i, h in enumerate(heads) if h in LEFT or h in left}
        self.note = heads[-1] == "note"
        self.rows = []
        self.widths = list(widths) if widths else [len(h) for h in heads]

    def add(self, *cells):
        cells = ["" if c is None else str(c) for c in cells]
        cells += [""] * (len(self.heads) - len(cells))
        self.rows.append(cells)
        return cells

    def _line(self, cells, widths):
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            if self.note and i == len(cells) - 1:
                out.append(c)
            elif i in self.left:
                out.append(c.ljust(w))
            else:
                out.append(c.rjust(w))
        return "  ".join(out).rstrip()

    def header(self):
        return self._line(self.heads, [max(w, len(h)) for w, h in zip(self.widths, self.heads)])

    def line(self, *cells):
        """One row, at the fixed widths (for rows printed as they come)."""
        cells = self.add(*cells)
        return self._line(cells, [max(w, len(h)) for w, h in zip(self.widths, self.heads)])

    def render(self):
        """The table, sized to its cells; a column empty in every row is left out (the
        goal and result columns of figures that have none, an unused note column)."""
        keep = [i for i in range(len(self.heads))
                if i == 0 or any(r[i] for r in self.rows)]
        t = Table(*[self.heads[i] for i in keep])
        t.left = {j for j, i in enumerate(keep) if i in self.left}
        t.note = self.note and keep[-1] == len(self.heads) - 1
        t.rows = [[r[i] for i in keep] for r in self.rows]
        widths = [max([len(h)] + [len(r[j]) for r in t.rows]) for j, h in enumerate(t.heads)]
        return "\n".join([t._line(t.heads, widths)] + [t._line(r, widths) for r in t.rows])


class Report:
    """A mode's output: title, lines, tables, and the verdict over its goals, printed to
    @stream as it is built (stdout carries nothing else); text() is all of it, for a
    results file."""

    def __init__(self, title, stream=sys.stdout):
        self.parts = [title]
        self.met, self.missed = [], []
        self.stream = stream
        self._out(title)

    def _out(self, text):
        if self.stream is not None:
            print(text, file=self.stream, flush=True)

    def say(self, *lines):
        for line in lines:
            self.parts.append(line)
            self._out(line)

    def blank(self):
        self.say("")

    def table(self, t):
        self.say("", t.render())

    def check(self, name, value, goal):
        """The ratio, goal and result cells of a row with a goal; counted for the
        verdict under @name."""
        ok = goal.met(value)
        (self.met if ok else self.missed).append(f"{name} ({goal.show(value)}, goal {goal})")
        return goal.show(value), str(goal), MEETS if ok else MISSES

    def verdict(self):
        n = len(self.met) + len(self.missed)
        if not n:
            line = "verdict: no goals for these figures"
        else:
            line = f"verdict: {len(self.met)} of {n} goals met"
            if self.missed:
                line += "; missed: " + "; ".join(self.missed)
        self.say("", line)
        return line

    def text(self):
        return "\n".join(self.parts) + "\n"
