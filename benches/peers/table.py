"""Tabulates the PEERS lines of benches/peers/run.sh: median and range per side, and the ratio."""
import statistics
import sys
from collections import defaultdict

results, rounds = sys.argv[1], sys.argv[2]
runs = defaultdict(list)  # (side, workload) -> [fields]
for line in open(results):
    side, workload, *fields = line.split()
    runs[(side, workload)].append(dict(f.split("=") for f in fields))

WORKLOADS = [
    ("A", "wall_ms", "A: one task, 1,000,000 x (add i % 10,000, get, done)"),
    ("B", "wall_ms", "B: 1 producer, 1,000,000 adds over 10,000 keys, 4 workers"),
    ("C", "wall_ms", "C: 1 producer, 1,000,000 adds over 100 keys, 4 workers"),
    ("D", "wall_ms", "D: 1,000,000 x (add_rate_limited + forget)"),
    ("E", "wall_ms", "E: 100,000 add_after 0-50 ms, 1 worker: wall time"),
    ("E", "p50_ms", "E: lateness p50"),
    ("E", "p99_ms", "E: lateness p99"),
    ("E", "max_ms", "E: lateness max"),
    ("E", "after_p99_ms", "E: lateness p99 of the keys due after the producer's last add"),
    ("F", "wall_ms", "F: controller, no-op reconciler, 20 x 10,000 keys, 4 workers"),
]
EXTRA = {"B": "gets", "C": "gets", "F": "reconciles"}


def cell(values, unit="ms"):
    med = statistics.median(values)
    return f"{med:.1f} ({min(values):.1f}-{max(values):.1f})"


print(f"\nmedian (min-max) over {rounds} alternating rounds, milliseconds; ratio = client-go / ours"
      " (wall time or lateness: > 1 means ours is faster or less late)\n")
print(f"| workload | client-go / controller-runtime | reconcile-host | ratio |")
print("| --- | ---: | ---: | ---: |")
for workload, field, title in WORKLOADS:
    go = [float(r[field]) for r in runs[("go", workload)]]
    rust = [float(r[field]) for r in runs[("rust", workload)]]
    if not go or not rust:
        continue
    ratio = statistics.median(go) / statistics.median(rust) if statistics.median(rust) else float("inf")
    extra = EXTRA.get(workload) if field == "wall_ms" else None
    g, r = cell(go), cell(rust)
    if extra:
        g += f"; {statistics.median(int(x[extra]) for x in runs[('go', workload)]):,.0f} {extra}"
        r += f"; {statistics.median(int(x[extra]) for x in runs[('rust', workload)]):,.0f} {extra}"
    print(f"| {title} | {g} | {r} | {ratio:.2f}x |")

shares = {side: [float(r["after_share"]) for r in runs[(side, "E")] if "after_share" in r]
          for side in ("go", "rust")}
if shares["go"] and shares["rust"]:
    print(f"\nE: keys due after the producer's last add (median share): client-go "
          f"{statistics.median(shares['go']):.0%}, reconcile-host {statistics.median(shares['rust']):.0%}")
