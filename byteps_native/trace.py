"""Merge per-process timelines into one trace that Perfetto / chrome://tracing opens.

    BYTEPS_TRACE_ON=1 BYTEPS_TRACE_DIR=traces bpslaunch --local-workers 2 -- python train.py
    python -m byteps_native.trace merge traces -o merged.json
"""
import argparse
import glob
import json
import os
import sys


def merge(trace_dir):
    """All events of all rank*/server* files, each process keeping its own pid lane."""
    events = []
    files = sorted(glob.glob(os.path.join(trace_dir, "rank*.json"))) + \
        sorted(glob.glob(os.path.join(trace_dir, "server*.json")))
    if not files:
        raise FileNotFoundError(f"no rank*.json or server*.json traces in {trace_dir}")
    for path in files:
        with open(path) as f:
            events.extend(json.load(f)["traceEvents"])
    return {"displayTimeUnit": "ms", "traceEvents": events}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="merge a trace directory into one file")
    m.add_argument("trace_dir")
    m.add_argument("-o", "--output", default="merged_trace.json")
    args = parser.parse_args(argv)
    merged = merge(args.trace_dir)
    with open(args.output, "w") as f:
        json.dump(merged, f)
    print(f"{len(merged['traceEvents'])} events -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
