"""What the report scripts share: a run directory's rounds and reading their JSON figures."""
import glob
import json
import os


def rounds_in(run):
    """The round-N directories of a run directory, by N."""
    return sorted(glob.glob(os.path.join(run, "round-*")), key=lambda d: int(d.rsplit("-", 1)[1]))


def load(path):
    with open(path) as f:
        return json.load(f)


def get(d, path):
    """The value at a dotted path ("publish_latency_ms.p99") in nested dicts, or None."""
    for p in path.split("."):
        d = d.get(p) if isinstance(d, dict) else None
    return d
