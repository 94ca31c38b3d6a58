"""Samples the byte counters of network devices every few milliseconds, so a
benchmark can say how busy a link was, not only how many bytes it carried:
run inside the namespace that holds the devices (the emulated cluster's
switch, see cluster.py `Cluster.sample_links`), it appends one line per
sample, `<CLOCK_MONOTONIC seconds> <dev> <rx_bytes> <tx_bytes>`, until
SIGTERM. CLOCK_MONOTONIC is one clock for every namespace of a host, so a
worker's own timestamps select the steady-state window.

    python3 link_sampler.py OUT INTERVAL_S DEV [DEV...]
"""
import os
import signal
import sys
import time


def main():
    out_path, interval, devices = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    # Kept open: a sample is two preads per device, not two opens.
    files = [(d, os.open(f"/sys/class/net/{d}/statistics/rx_bytes", os.O_RDONLY),
              os.open(f"/sys/class/net/{d}/statistics/tx_bytes", os.O_RDONLY)) for d in devices]
    lines = []
    next_at = time.monotonic()
    while not stop:
        now = time.monotonic()
        for dev, rx, tx in files:
            lines.append(f"{now:.6f} {dev} {int(os.pread(rx, 32, 0))} {int(os.pread(tx, 32, 0))}\n")
        if len(lines) >= 4096:
            with open(out_path, "a") as f:
                f.writelines(lines)
            lines.clear()
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    with open(out_path, "a") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
