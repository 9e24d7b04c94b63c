"""The table the side-by-side cost modes print (bench/run.sh security-cost, topic-config-cost,
ab): medians over ROUNDS rounds of (a) produce and (d) consume throughput per configuration,
and each configuration's ratio to the reference configuration (`plain` unless --ref names
another): the ratio of the medians, and the range of the per-round ratios.

    python3 bench/cost_table.py [--ref CONFIG] RUN ROUNDS CONFIG...

reads RUN/r<round>-<config>-<a|d>/report.json, as lib.sh's cost_rounds writes them."""
import json
import statistics
import sys

args = sys.argv[1:]
ref = "plain"
if args[:1] == ["--ref"]:
    ref, args = args[1], args[2:]
run, rounds, configs = args[0], int(args[1]), args[2:]
if ref not in configs:
    sys.exit(f"cost_table.py: the reference configuration {ref!r} is not among {configs}")


def rate(r, c, w, key):
    with open(f"{run}/r{r}-{c}-{w}/report.json") as f:
        return json.load(f)[key]


others = [c for c in configs if c != ref]
print("| workload | " + " | ".join(configs) + " | " + " | ".join(f"{c}/{ref}" for c in others) + " |")
print("|---" * (1 + len(configs) + len(others)) + "|")
for w, key, label in [("a", "publish_rate", "(a) produce, records/s"), ("d", "consume_rate", "(d) consume, records/s")]:
    med = {c: statistics.median(rate(r, c, w, key) for r in range(1, rounds + 1)) for c in configs}
    ratios = []
    for c in others:
        per = sorted(rate(r, c, w, key) / rate(r, ref, w, key) for r in range(1, rounds + 1))
        ratios.append(f"{med[c] / med[ref]:.3f} ({per[0]:.3f}–{per[-1]:.3f})")
    print(f"| {label} | " + " | ".join(f"{med[c]:,.0f}" for c in configs) + " | " + " | ".join(ratios) + " |")
