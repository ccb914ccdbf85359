#!/bin/bash
# Description: dmafs --help and dmafs(8) cannot drift apart: every -o option that
# dmafs --help names is documented in the OPTIONS section of man/dmafs.8 (as the tag of
# an entry), every option documented there is named in --help, and so is every option
# the daemon's parser takes (opt_spec in fs/daemon/options.c); -f, -d, -h/--help and
# -V/--version are in both. --help starts with the usage lines and the options a first
# mount needs, before any other heading.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_python
[ -x "$DMAFS" ] || t_skip "daemon not built: $DMAFS"
t_workdir
"$DMAFS" --help >"$T_WORK/help" 2>&1 || t_fail "dmafs --help exited $?: $(cat "$T_WORK/help")"
t_py - "$T_WORK/help" "$top_srcdir/man/dmafs.8" "$top_srcdir/fs/daemon/options.c" <<'PY' || t_fail "dmafs --help and dmafs(8) disagree (see above)"
import re, sys

help_text = open(sys.argv[1]).read()
man = open(sys.argv[2]).read().splitlines()
src = open(sys.argv[3]).read()
bad = []


def names(items, in_o=False):
    """-o names and dash options of a list of option items ("-o a=X", "b|c", "-f"); an
    item without a dash is an -o name after an -o item, or everywhere with @in_o."""
    opts, dashes = set(), set()
    for item in items:
        item = item.strip()
        if item.startswith("-o "):
            item, in_o = item[3:].strip(), True
        elif item.startswith("-"):
            dashes.add(item.split()[0])
            in_o = False
            continue
        elif not in_o:
            continue
        for alt in (item.split("=")[0],) if "=" in item else item.split("|"):
            m = re.match(r"[a-z_0-9]+$", alt.strip())
            if m:
                opts.add(m.group(0))
            else:
                bad.append(f"cannot read an option name from '{alt}'")
    return opts, dashes


# --help: the option column of each line that starts with "  -", up to its description
h_opts, h_dash = set(), set()
for line in help_text.splitlines():
    if not line.startswith("  -"):
        continue
    col = re.split(r"\s{2,}", line.strip())[0]
    o, d = names(col.split(", "))
    h_opts |= o
    h_dash |= d

# dmafs(8): the tag line after each .TP between .SH OPTIONS and the next .SH
m_opts, m_dash = set(), set()
start = man.index(".SH OPTIONS")
end = next(i for i in range(start + 1, len(man)) if man[i].startswith(".SH "))
for i in range(start, end):
    if man[i] != ".TP":
        continue
    tag = re.sub(r"^\.(B|BI|BR|IR|I) ", "", man[i + 1])
    tag = re.sub(r"\\f[BIRP]", "", tag).replace("\\-", "-").replace("\\&", "").replace('"', "")
    if "option [" in tag:
        continue  # -o option[,option...]
    o, d = names(tag.split(","), in_o=True)
    m_opts |= o
    m_dash |= d

# the parser: opt_spec's templates and keys, and the options opt_proc reads itself
p_opts = set(re.findall(r'OPT\("([a-z_0-9]+)', src))
p_opts |= {k for k in re.findall(r'FUSE_OPT_KEY\("([^"]+)"', src) if not k.startswith("-")}
p_opts |= set(re.findall(r'strncmp\(arg, "([a-z_0-9]+)=', src))

for n in sorted(h_opts - m_opts):
    bad.append(f"-o {n} is in dmafs --help but not an entry of dmafs(8)'s OPTIONS")
for n in sorted(m_opts - h_opts):
    bad.append(f"{n} is documented in dmafs(8)'s OPTIONS but not in dmafs --help")
for n in sorted(p_opts - h_opts):
    bad.append(f"{n} is taken by fs/daemon/options.c but not in dmafs --help")
want_dash = {"-f", "-d", "-h", "--help", "-V", "--version"}
for d in sorted(want_dash - h_dash):
    bad.append(f"{d} is not in dmafs --help")
for d in sorted(want_dash - m_dash):
    bad.append(f"{d} is not an entry of dmafs(8)'s OPTIONS")
for d in sorted((h_dash | m_dash) - want_dash):
    bad.append(f"{d}: an option of one of them this test does not know")
if len(h_opts) < 40 or len(m_opts) < 40 or len(p_opts) < 40:
    bad.append(f"too few options read ({len(h_opts)} from --help, {len(m_opts)} from dmafs(8), "
               f"{len(p_opts)} from options.c): the parsing is broken")

# the first block: usage, then what a first mount needs, before any other heading
blocks = help_text.split("\n\n")
first = next((b for b in blocks if b.endswith(":") or ":\n" in b), "")
if not first.startswith("Most used:"):
    bad.append(f"the first options block is not 'Most used:': {first[:60]!r}")
for o in ("ro", "allow_other", "tier", "threads"):
    if not re.search(rf"^  -o {o}\b", first, re.M):
        bad.append(f"-o {o} is not in the first options block")
for b in bad:
    print(f"[help_man] {b}")
print(f"[help_man] {len(h_opts)} options in --help, {len(m_opts)} in dmafs(8), {len(p_opts)} in the parser")
sys.exit(1 if bad else 0)
PY
t_log "PASS"
