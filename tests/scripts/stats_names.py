#!/usr/bin/env python3
"""The counter tables (proxy/stats.def, engine/stats.def) against
themselves and README.md.

- Every INFO counter has its Prometheus twin, except the rows listed in
  EXCEPTIONS with the reason; counters' families end in _total, gauges'
  do not; no INFO field or family is named twice.
- README.md names only families (and, in the INFO command's row, INFO
  fields) that exist (in the tables, or written by
  hand and frozen in tests/integration/stats_names.txt), and documents
  every family of the tables: by its full name, or as `_suffix` in a
  table row or paragraph that names a family with the same prefix in full (README's
  `lockproxy_locks_acquired_total`, `_released_total` style).

Usage: stats_names.py <source root>. Exit 0 or 1 with every problem."""
import re
import sys

# INFO fields without a Prometheus twin, and why.
EXCEPTIONS = {
    "max_clients": "a setting (--max-clients)",
    "latency_monitor_threshold_ms": "a setting (--latency-monitor-threshold)",
    "sync_replicas": "a setting (--sync-replicas)",
    "sync_timeout_ms": "a setting (--sync-timeout)",
    "total_commands_processed": "its twin is the labelled lockproxy_commands_total{cmd,result}",
}

ROW = re.compile(
    r'\b([SV])\(\s*(?:(\w+),\s*)?(NULL|"\w+"),\s*(NULL|"\w+"),\s*(COUNTER|GAUGE),\s*"')


def rows(path):
    text = open(path).read().replace("\\\n", "\n")
    out = []
    for m in ROW.finditer(text):
        kind, field, info, prom, typ = m.groups()
        out.append((path, None if info == "NULL" else info.strip('"'),
                    None if prom == "NULL" else prom.strip('"'), typ))
    return out


def units(text):
    """README's table rows one by one, and its other paragraphs whole."""
    out, para = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            out.append(line)
        elif line.strip():
            para.append(line)
            continue
        if para:
            out.append(" ".join(para))
            para = []
    return out


def main(root):
    problems = []
    table = rows(root + "/proxy/stats.def") + rows(root + "/engine/stats.def")
    if len(table) < 60:
        problems.append(f"only {len(table)} rows parsed from the tables")
    seen = set()
    for path, info, prom, typ in table:
        for name in (info, prom):
            if name and name in seen:
                problems.append(f"{path}: {name} named twice")
            seen.add(name)
        if info and not prom and info not in EXCEPTIONS:
            problems.append(f"{path}: INFO {info} has no Prometheus twin")
        if info in EXCEPTIONS and prom:
            problems.append(f"{path}: {info} is listed as an exception but has {prom}")
        if prom and (typ == "COUNTER") != prom.endswith("_total"):
            problems.append(f"{path}: {prom} is a {typ} (counters end in _total, only they)")
    families = {prom for _, _, prom, _ in table if prom}
    golden = open(root + "/tests/integration/stats_names.txt").read()
    known = families | set(re.findall(r"^metric (\w+) ", golden, re.M))
    known |= set(re.findall(r'"(lockproxy_sentinel_\w+)', open(root + "/proxy/metrics.c").read()))
    readme = units(open(root + "/README.md").read())
    for unit in readme:
        for name, star in re.findall(r"`(lockproxy_\w+)(\*?)", unit):
            if name not in known and not (star and any(k.startswith(name) for k in known)):
                problems.append(f"README.md: {name}{star} is no metric family")
    # The INFO command's row names fields by their INFO names.
    info_names = {i for _, i, _, _ in table if i}
    info_names |= set(re.findall(r"^info \w+ (\w+)$", golden, re.M))
    for unit in readme:
        if not unit.startswith("| `INFO [section]`"):
            continue
        for name in re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]+)`", unit):
            if name not in info_names:
                problems.append(f"README.md: INFO row names {name}, which INFO does not show")
    for fam in sorted(families):
        if any(f"`{fam}`" in l or f"`{fam}{{" in l for l in readme):
            continue
        ok = False
        parts = fam.split("_")
        for k in range(2, len(parts)):
            prefix, suffix = "_".join(parts[:k]), "_" + "_".join(parts[k:])
            if any(f"`{suffix}`" in l and re.search(rf"`{prefix}(_\w+)?`", l) for l in readme):
                ok = True
                break
        if not ok:
            problems.append(f"README.md does not document {fam}")
    for p in problems:
        print("stats_names:", p)
    print(f"stats_names: {len(table)} rows, {len(families)} families, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
