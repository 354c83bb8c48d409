#!/usr/bin/python3
"""Draws a soak run (run.py's soak.json) as one PNG of six panels against
simulated days: disk by part, blocks by compaction level, the oldest data
kept, RSS, open files and threads, and CPU per simulated day.

Usage: /usr/bin/python3 bench/soak/plot.py /tmp/soak/soak.json docs/img/soak.png
Needs Debian's python3-matplotlib (scripts/install-deps.sh installs it).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 2 ** 20
DAY_MS = 86400 * 1000


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    s, summary = doc["samples"], doc["summary"]
    day = [x["day"] for x in s]
    fig, ax = plt.subplots(3, 2, figsize=(12, 11))
    fig.suptitle("trainwatch serve, default flags, %g simulated days at %gx (%s)" %
                 (summary["days"], summary["speed"], "bench/soak/run.py"), fontsize=12)

    a = ax[0][0]
    for key, label in (("block_bytes", "blocks"), ("wal_bytes", "WAL + checkpoint"), ("runs_db_bytes", "runs.db"),
                       ("logs_bytes", "log store")):
        a.plot(day, [x[key] / MIB for x in s], label=label)
    a.set_title("disk (MiB)")
    a.legend(fontsize=8)

    a = ax[0][1]
    levels = sorted({int(k) for x in s for k in x["levels"]})
    for lvl in levels:
        a.plot(day, [x["levels"].get(str(lvl), 0) for x in s], label="level %d" % lvl)
    a.plot(day, [x["blocks"] for x in s], "k:", label="all")
    a.set_title("blocks by compaction level")
    a.legend(fontsize=8)

    a = ax[1][0]
    a.plot(day, [(x["sim_ms"] - x["oldest_block_ms"]) / DAY_MS if x["oldest_block_ms"] else 0 for x in s],
           label="oldest block")
    a.plot(day, [x["log_partitions"] for x in s], label="log partitions (one a day)")
    a.set_title("data kept (days; retention 15d)")
    a.legend(fontsize=8)

    a = ax[1][1]
    a.plot(day, [x["rss_bytes"] / MIB for x in s])
    a.set_title("RSS (MiB)")
    a.set_ylim(bottom=0)

    a = ax[2][0]
    a.plot(day, [x["open_files"] for x in s], label="open files")
    a.plot(day, [x["threads"] for x in s], label="threads")
    a.set_title("open files and threads")
    a.set_ylim(bottom=0)
    a.legend(fontsize=8)

    a = ax[2][1]
    cpu_day, cpu = [], []
    for i in range(24, len(s), 24):
        cpu_day.append(s[i]["day"])
        cpu.append(s[i]["cpu_seconds"] - s[i - 24]["cpu_seconds"])
    a.plot(cpu_day, cpu)
    a.set_title("CPU seconds per simulated day")
    a.set_ylim(bottom=0)

    for row in ax:
        for a in row:
            a.set_xlabel("simulated days")
            a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=80)


if __name__ == "__main__":
    main()
