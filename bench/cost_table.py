"""The table the side-by-side cost scripts print (security-cost.sh, topic-config-cost.sh):
medians over ROUNDS rounds of (a) produce and (d) consume throughput per configuration, and
each configuration's ratio to `plain` (median, and the range of the per-round ratios).

    python3 bench/cost_table.py RUN ROUNDS CONFIG...

reads RUN/r<round>-<config>-<a|d>/report.json, as lib.sh's rb_bench writes them."""
import json
import statistics
import sys

run, rounds, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def rate(r, c, w, key):
    with open(f"{run}/r{r}-{c}-{w}/report.json") as f:
        return json.load(f)[key]


others = [c for c in configs if c != "plain"]
print("| workload | " + " | ".join(configs) + " | " + " | ".join(f"{c}/plain" for c in others) + " |")
print("|---" * (1 + len(configs) + len(others)) + "|")
for w, key, label in [("a", "publish_rate", "(a) produce, records/s"), ("d", "consume_rate", "(d) consume, records/s")]:
    med = {c: statistics.median(rate(r, c, w, key) for r in range(1, rounds + 1)) for c in configs}
    ratios = []
    for c in others:
        per = sorted(rate(r, c, w, key) / rate(r, "plain", w, key) for r in range(1, rounds + 1))
        ratios.append(f"{med[c] / med['plain']:.3f} ({per[0]:.3f}–{per[-1]:.3f})")
    print(f"| {label} | " + " | ".join(f"{med[c]:,.0f}" for c in configs) + " | " + " | ".join(ratios) + " |")
