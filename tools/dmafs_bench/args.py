# SPDX-License-Identifier: MIT
"""args - the options of the modes: one parser, one way to check a value, one message
format ("MODE: --option must be ... (got 'VALUE')"), and --help made from the same
lists, so that what a mode takes and what its help says cannot differ."""

import re
import textwrap
from types import SimpleNamespace

from .rig import Fail

WHOLE = re.compile(r"[0-9]+$")
NUMBER = re.compile(r"[0-9]+([.][0-9]+)?$")


class Bad(ValueError):
    """A value an option does not take; the text says what it wants ("must be ...")."""


class Opt:
    """--name [META]: @check(text) gives the value or raises Bad; a flag has no @meta."""

    def __init__(self, name, meta=None, default=None, check=None, help=""):
        self.name, self.meta, self.default, self.check, self.help = name, meta, default, check, help

    @property
    def key(self):
        return self.name[2:].replace("-", "_")


def whole(lo=1, hi=None, what="a whole number"):
    def check(v):
        if not WHOLE.match(v) or int(v) < lo or (hi is not None and int(v) > hi):
            plain = what == "a whole number"
            raise Bad(f"must be {what}" + (" " if plain else ", ")
                      + (f"from {lo} to {hi}" if hi is not None else
                         f"{'of ' if plain else ''}at least {lo}"))
        return int(v)
    return check


def number(lo=None, what="a number"):
    """A decimal number (digits, a point, digits: no sign, exponent or comma)."""
    def check(v):
        if not NUMBER.match(v):
            raise Bad(f"must be {what}")
        x = float(v)
        if lo is not None and x < lo:
            raise Bad(f"must be at least {lo:g}")
        return x
    return check


def gib_opt(name, default, lo, help):
    """--NAME G: a number of GiB, at least @lo."""
    return Opt(name, "G", default, number(lo, "a number of GiB"), help)


def choice(*values):
    def check(v):
        if v not in values:
            raise Bad("must be " + ", ".join(values[:-1]) + f" or {values[-1]}")
        return v
    return check


def matching(pattern, what):
    rx = re.compile(pattern + "$")

    def check(v):
        if not rx.match(v):
            raise Bad(f"must be {what}")
        return v
    return check


def counts(lo=1, hi=None, what="a whole number"):
    """N[,N...]: a list of whole numbers."""
    one = whole(lo, hi, what)

    def check(v):
        try:
            return [one(x) for x in v.split(",")]
        except Bad as e:
            raise Bad(f"wants numbers separated by commas, each {e}") from None
    return check


def text(v):
    return v


def parse(mode, opts, argv):
    """The values of @opts (defaults for those not given) from @argv, or None for --help.
    Takes --name VALUE and --name=VALUE."""
    by = {o.name: o for o in opts}
    vals = {o.key: o.default for o in opts}
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a in ("-h", "--help"):
            return None
        name, eq, val = a.partition("=") if a.startswith("--") else (a, "", "")
        o = by.get(name)
        if o is None:
            if not a.startswith("-"):
                raise Fail(f"{mode}: unexpected argument '{a}' (see dmafs-bench {mode} --help)")
            raise Fail(f"{mode}: unknown option '{name}' (see dmafs-bench {mode} --help)")
        if o.meta is None:
            if eq:
                raise Fail(f"{mode}: {name} takes no value (got '{a}')")
            vals[o.key] = True
            continue
        if not eq:
            if i >= len(argv) or argv[i].split("=")[0] in by:
                raise Fail(f"{mode}: {name} needs a value ({o.meta})")
            val = argv[i]
            i += 1
        if val == "":
            raise Fail(f"{mode}: {name} needs a value ({o.meta})")
        try:
            vals[o.key] = (o.check or text)(val)
        except Bad as e:
            raise Fail(f"{mode}: {name} {e} (got '{val}')") from None
    return SimpleNamespace(**vals)


def usage(mode, opts):
    """dmafs-bench MODE [--a A] [--b]..., wrapped (an item is never split), to follow a
    7-column "usage: "."""
    items = [f"[{o.name}{' ' + o.meta if o.meta else ''}]" for o in opts]
    head = f"dmafs-bench {mode} "
    lines = [""]
    for item in items:
        if lines[-1] and 7 + len(head) + len(lines[-1]) + 1 + len(item) > 88:
            lines.append("")
        lines[-1] += (" " if lines[-1] else "") + item
    return "\n".join([head + lines[0]] + [" " * (7 + len(head)) + x for x in lines[1:]])


def usages(mod):
    """The usage lines of a mode: all its options, then those of another form it has
    (USAGE2: a list of option names, the first given as is)."""
    out = [usage(mod.NAME, mod.OPTIONS)]
    if hasattr(mod, "USAGE2"):
        by = {o.name: o for o in mod.OPTIONS}
        first, rest = mod.USAGE2[0], [by[n] for n in mod.USAGE2[1:]]
        o = by[first]
        out.append(usage(f"{mod.NAME} {first} {o.meta}", rest))
    return out


def help_text(mod):
    """--help of a mode module: usage, what it does, its options, its goals."""
    out = ["usage: " + "\n       ".join(usages(mod)), ""]
    out.append("\n\n".join(textwrap.fill(p, 88, break_on_hyphens=False)
                           for p in mod.ABOUT.strip().split("\n\n")))
    out.append("")
    out.append("options:")
    width = max(len(o.name) + len(o.meta or "") + 1 for o in mod.OPTIONS) + 2
    for o in mod.OPTIONS + [Opt("-h, --help", help="print this help and exit")]:
        left = f"  {o.name}" + (f" {o.meta}" if o.meta else "")
        body = textwrap.wrap(o.help, 86 - width, break_on_hyphens=False) or [""]
        out.append(left.ljust(width + 2) + body[0])
        out += [" " * (width + 2) + b for b in body[1:]]
    goals = getattr(mod, "GOALS", ())
    out.append("")
    if goals:
        out.append("goals (each ratio's, printed with the table, MEETS or MISSES):")
        out += [f"  {g.what}: {g}" for g in goals]
    else:
        out.append("goals: none; the figures and ratios are information.")
    out.append("")
    out.append(textwrap.fill("Runs as root. dmafs, mkfs.dmafs and the other dmafs programs "
                             "come from DMAFS_BUILDDIR (a build tree) when it is set, else "
                             "from PATH. See dmafs-bench(1).", 88))
    return "\n".join(out) + "\n"
