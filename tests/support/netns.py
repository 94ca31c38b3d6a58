"""Emulated hosts on one machine: Linux network namespaces on a shaped bridge.

    from tests.support.netns import Cluster
    with Cluster(hosts=4, rate="1gbit") as cluster:
        sched = cluster.start(0, "scheduler", [sys.executable, "-m", "byteps_native.scheduler"],
                              env={"DMLC_ROLE": "scheduler", ...})
        ...
        cluster.wait([w0, w1], timeout=60)
    # every process stopped, every namespace deleted -- also on an exception

Topology. A "switch" namespace holds a bridge; host i is a namespace whose
`eth0` (address 192.0.2.(10+i)/24) is one end of a veth pair whose other end
(`p<i>`) sits on the bridge. Nothing is created in the caller's namespace, so
several clusters (other people's test runs) never collide: names carry the
creating pid and a sequence number, and addresses live in separate switches.

Shaping. Each host link is limited in both directions with an egress tbf:
on `eth0` inside the host (upload) and on `p<i>` in the switch (download). A
bucket below ~1 mbit splits the kernel's 64 KB GSO segments, burns CPU and
distorts the result, so `burst` defaults to 1mbit. netem is not used (not
available on these kernels).

Needs root and iproute2; `Cluster.unavailable_reason()` says why not, so tests
can skip with a stated reason.
"""
import atexit
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tests.support.processes import LoggedProcess

SUBNET_PREFIX = "192.0.2."  # TEST-NET-1 (RFC 5737): never routed anywhere
FIRST_HOST_OCTET = 10
NAME_PREFIX = "bpsn-"

_sequence = itertools.count()
_live_clusters = set()


class ClusterError(RuntimeError):
    pass


def _run(argv, check=True):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and proc.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


class Host:
    def __init__(self, index, netns, address):
        self.index = index
        self.netns = netns
        self.address = address
        self.name = f"h{index}"

    def __repr__(self):
        return f"Host({self.name}, {self.address}, netns={self.netns})"


class Cluster:
    """N emulated hosts; use as a context manager (teardown is guaranteed).

    rate:  per-host link rate in each direction, tc syntax ("1gbit"), or None for unshaped.
    burst: tbf bucket (>= 1mbit recommended).
    mtu:   link MTU (1500 like Ethernet).
    logdir: where process logs go (a fresh temporary directory when None; removed at
            teardown unless keep_logs or a process failed and keep_logs is None).
    """

    def __init__(self, hosts, rate="1gbit", burst="1mbit", latency="50ms", mtu=1500, logdir=None,
                 keep_logs=None):
        if hosts < 1 or hosts > 200:
            raise ValueError(f"hosts={hosts} must be in 1..200")
        self.num_hosts = hosts
        self.rate = rate
        self.burst = burst
        self.latency = latency
        self.mtu = mtu
        self.keep_logs = keep_logs
        self.tag = f"{NAME_PREFIX}{os.getpid()}-{next(_sequence)}"
        self.switch = f"{self.tag}-sw"
        self.hosts = [Host(i, f"{self.tag}-h{i}", f"{SUBNET_PREFIX}{FIRST_HOST_OCTET + i}") for i in range(hosts)]
        self._own_logdir = logdir is None
        self.logdir = logdir
        self.processes = []
        self._namespaces = []
        self._up = False

    # ---- availability -------------------------------------------------------------------------

    @staticmethod
    def unavailable_reason():
        """None when namespaces can be created here, else a sentence saying why not."""
        if os.name != "posix" or not os.path.exists("/proc/self/ns/net"):
            return "network namespaces need Linux"
        if os.geteuid() != 0:
            return "creating network namespaces needs root (run as root or in a privileged container)"
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                return f"`{tool}` (iproute2) is not installed"
        probe = f"{NAME_PREFIX}{os.getpid()}-probe"
        proc = _run(["ip", "netns", "add", probe], check=False)
        if proc.returncode != 0:
            return f"`ip netns add` failed: {proc.stderr.strip()}"
        try:
            proc = _run(["ip", "-n", probe, "link", "add", "v0", "type", "veth", "peer", "name", "v1"], check=False)
            if proc.returncode != 0:
                return f"cannot create veth pairs: {proc.stderr.strip()}"
            proc = _run(["ip", "-n", probe, "link", "add", "br0", "type", "bridge"], check=False)
            if proc.returncode != 0:
                return f"cannot create bridges: {proc.stderr.strip()}"
            proc = _run(["tc", "-n", probe, "qdisc", "add", "dev", "v0", "root", "tbf", "rate", "1gbit",
                         "burst", "1mbit", "latency", "50ms"], check=False)
            if proc.returncode != 0:
                return f"tc tbf is unavailable: {proc.stderr.strip()}"
        finally:
            _run(["ip", "netns", "del", probe], check=False)
        return None

    # ---- lifecycle ----------------------------------------------------------------------------

    def __enter__(self):
        self.setup()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.teardown(failed=exc_type is not None)
        return False

    def setup(self):
        reason = self.unavailable_reason()
        if reason:
            raise ClusterError(reason)
        _live_clusters.add(self)
        if self._own_logdir:
            self.logdir = tempfile.mkdtemp(prefix=f"{self.tag}-logs-")
        else:
            os.makedirs(self.logdir, exist_ok=True)
        self._up = True
        try:
            self._add_netns(self.switch)
            sw = ["ip", "-n", self.switch]
            _run(sw + ["link", "add", "br0", "type", "bridge"])
            _run(sw + ["link", "set", "br0", "up"])
            for host in self.hosts:
                self._add_host(host)
        except BaseException:
            self.teardown(failed=True)
            raise

    def _add_netns(self, name):
        _run(["ip", "netns", "add", name])
        self._namespaces.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _add_host(self, host):
        self._add_netns(host.netns)
        port = f"p{host.index}"
        # Created inside the switch, the host end moved out: nothing touches the caller's namespace.
        _run(["ip", "-n", self.switch, "link", "add", port, "mtu", str(self.mtu), "type", "veth",
              "peer", "name", "eth0", "mtu", str(self.mtu), "netns", host.netns])
        _run(["ip", "-n", self.switch, "link", "set", port, "master", "br0"])
        _run(["ip", "-n", self.switch, "link", "set", port, "up"])
        _run(["ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0"])
        _run(["ip", "-n", host.netns, "link", "set", "eth0", "up"])
        if self.rate:
            for netns, dev in ((host.netns, "eth0"), (self.switch, port)):
                _run(["tc", "-n", netns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                      "burst", self.burst, "latency", self.latency])

    def teardown(self, failed=False):
        if not self._up:
            return
        self._up = False
        for proc in reversed(self.processes):
            proc.stop()
        for name in reversed(self._namespaces):
            _run(["ip", "netns", "del", name], check=False)
        self._namespaces.clear()
        _live_clusters.discard(self)
        if failed and self.keep_logs is None:
            self.keep_logs = True
        if self._own_logdir and not self.keep_logs and self.logdir:
            shutil.rmtree(self.logdir, ignore_errors=True)

    # ---- processes ----------------------------------------------------------------------------

    def host(self, index):
        return self.hosts[index]

    def start(self, host, name, argv, env=None, inherit_env=True):
        """Start argv inside host (index or Host); env is added to os.environ (or replaces it)."""
        if not self._up:
            raise ClusterError("cluster is not set up (use `with Cluster(...)`)")
        host = self.hosts[host] if isinstance(host, int) else host
        full_env = dict(os.environ) if inherit_env else {}
        full_env.update({k: str(v) for k, v in (env or {}).items()})
        proc = LoggedProcess(name, argv, full_env, os.path.join(self.logdir, f"{host.name}-{name}.log"), cwd=None,
                             netns=host.netns, stop_grace=3.0)
        proc.host = host
        self.processes.append(proc)
        return proc

    def run(self, host, argv, timeout=30):
        """Run a short command inside host and return its CompletedProcess (text)."""
        host = self.hosts[host] if isinstance(host, int) else host
        return subprocess.run(["ip", "netns", "exec", host.netns] + list(argv), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)

    def wait(self, processes, timeout, watch=()):
        """Wait until every process in `processes` exits; fail fast if any (or one in `watch`) fails.

        Raises ClusterError naming the failed or hung process, with the tail of its output.
        """
        deadline = time.monotonic() + timeout
        pending = list(processes)
        while pending:
            for proc in list(pending) + [p for p in watch if p not in pending]:
                rc = proc.returncode
                if rc is not None and rc != 0:
                    raise ClusterError(f"{proc.name} on {proc.host.name} exited with {rc}:\n"
                                       f"{_tail(proc.output())}")
                if rc == 0 and proc in pending:
                    pending.remove(proc)
            if not pending:
                break
            if time.monotonic() > deadline:
                names = ", ".join(f"{p.name}@{p.host.name}" for p in pending)
                tails = "\n".join(f"--- {p.name}:\n{_tail(p.output())}" for p in pending)
                raise ClusterError(f"timed out after {timeout:.0f}s waiting for {names}\n{tails}")
            time.sleep(0.05)

    def tcp_ceiling(self, sender, receiver, flows=4, seconds=3.0, port=29400):
        """GB/s that `flows` plain TCP flows move from one host to another
        (tcp_ceiling.py, beside this file): the path's own ceiling on this machine."""
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcp_ceiling.py")
        receiver = self.hosts[receiver] if isinstance(receiver, int) else receiver
        serve = self.start(receiver, f"tcp-ceiling-{port}", [sys.executable, script, "serve", str(port), str(flows)])
        time.sleep(0.5)
        out = self.run(sender, [sys.executable, script, "send", receiver.address, str(port), str(flows), str(seconds)],
                       timeout=seconds + 30)
        self.wait([serve], timeout=30)
        return float(out.stdout.strip().splitlines()[-1])

    def link_stats(self):
        """Bytes sent by each host (tx of eth0) and received (tx of its switch port): {host: (tx, rx)}."""
        out = {}
        for host in self.hosts:
            tx = int(_read_ns_counter(host.netns, "eth0", "tx_bytes"))
            rx = int(_read_ns_counter(self.switch, f"p{host.index}", "tx_bytes"))
            out[host.name] = (tx, rx)
        return out


    def sample_links(self, interval=0.005):
        """Starts sampling every host's link every `interval` seconds (its
        switch port: the port's tx is the host's download, its rx the
        upload); stop() the returned LinkSamples, then ask it about any
        window of CLOCK_MONOTONIC (time.monotonic() of any process here)."""
        path = os.path.join(self.logdir, f"links-{next(_sequence)}.txt")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "link_sampler.py")
        ports = [f"p{h.index}" for h in self.hosts]
        popen = subprocess.Popen(["ip", "netns", "exec", self.switch, sys.executable, script, path, str(interval)] + ports,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        return LinkSamples(popen, path, {f"p{h.index}": h.name for h in self.hosts}, self.rate)

    def qdisc_drops(self):
        """Packets the shapers dropped per host: {host: (upload drops, download drops)}."""
        out = {}
        for host in self.hosts:
            out[host.name] = (_tbf_drops(host.netns, "eth0"), _tbf_drops(self.switch, f"p{host.index}"))
        return out


class LinkSamples:
    """The counters link_sampler.py recorded, per host: utilisation and idle
    share of each direction over a window."""

    def __init__(self, popen, path, host_of_port, rate):
        self._popen = popen
        self._path = path
        self._host_of_port = host_of_port
        self.rate_bytes = _rate_bytes(rate)
        self.series = {}  # host -> [(t, upload bytes, download bytes)]

    def stop(self):
        if self._popen.poll() is None:
            self._popen.send_signal(signal.SIGTERM)
            self._popen.wait(timeout=10)
        self.series = {}
        if os.path.exists(self._path):
            with open(self._path) as f:
                for line in f:
                    t, dev, rx, tx = line.split()
                    # At the switch port: rx is what the host sent, tx what it received.
                    self.series.setdefault(self._host_of_port[dev], []).append((float(t), int(rx), int(tx)))
        return self

    def summary(self, start=None, end=None, idle_below=0.05):
        """{host: {"upload"/"download": {"gbit_s", "utilisation", "idle_share"}}} over [start, end]:
        utilisation is bytes / (seconds x link rate); idle_share the share of
        sample intervals whose rate was below idle_below x the link rate."""
        out = {}
        for host, samples in self.series.items():
            window = [s for s in samples if (start is None or s[0] >= start) and (end is None or s[0] <= end)]
            if len(window) < 2:
                continue
            seconds = window[-1][0] - window[0][0]
            out[host] = {}
            for direction, k in (("upload", 1), ("download", 2)):
                total = window[-1][k] - window[0][k]
                idle = sum(1 for a, b in zip(window, window[1:])
                           if self.rate_bytes and (b[k] - a[k]) < idle_below * self.rate_bytes * (b[0] - a[0]))
                out[host][direction] = {
                    "gbit_s": round(total * 8 / seconds / 1e9, 3),
                    "utilisation": round(total / (seconds * self.rate_bytes), 3) if self.rate_bytes else None,
                    "idle_share": round(idle / (len(window) - 1), 3) if self.rate_bytes else None,
                }
        return out


    def step_profile(self, host, starts, idle_below=0.05):
        """Where one host's link sat idle inside each step: `starts` are the
        step boundaries (CLOCK_MONOTONIC, n+1 of them for n steps). Per
        direction, the medians over steps of: utilisation; `lead_idle_s`, from
        the step's start to the first busy sample interval (the forward pass
        and the backward's first buckets); `tail_idle_s`, from the last busy
        interval to the step's end (for the download: the last answer to the
        end of the step, i.e. the gather, the optimizer and the next step's
        start). Busy: above idle_below x the link rate."""
        samples = self.series.get(host)
        if not samples or not self.rate_bytes or len(starts) < 2:
            return None
        rows = {"upload": [], "download": []}
        for begin, end in zip(starts, starts[1:]):
            window = [s for s in samples if begin <= s[0] <= end]
            if len(window) < 3:
                continue
            for direction, k in (("upload", 1), ("download", 2)):
                busy = [(a[0], b[0]) for a, b in zip(window, window[1:])
                        if (b[k] - a[k]) >= idle_below * self.rate_bytes * (b[0] - a[0])]
                total = window[-1][k] - window[0][k]
                rows[direction].append({
                    "utilisation": total / ((window[-1][0] - window[0][0]) * self.rate_bytes),
                    "lead_idle_s": (busy[0][0] - begin) if busy else end - begin,
                    "tail_idle_s": (end - busy[-1][1]) if busy else end - begin,
                })

        def median(values):
            values = sorted(values)
            return round(values[len(values) // 2], 4) if values else None
        return {d: {m: median([r[m] for r in rs]) for m in ("utilisation", "lead_idle_s", "tail_idle_s")}
                for d, rs in rows.items()} | {"steps": len(rows["upload"])}


def _rate_bytes(rate):
    """tc's rate ("25gbit", "100mbit") in bytes per second; None when unshaped."""
    if not rate:
        return None
    text = rate.lower()
    for suffix, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * scale / 8
    raise ValueError(f"unknown rate {rate!r}")


def _tbf_drops(netns, dev):
    text = _run(["tc", "-s", "-n", netns, "qdisc", "show", "dev", dev]).stdout
    marker = "dropped "
    at = text.find(marker)
    return int(text[at + len(marker):].split(",")[0]) if at >= 0 else 0


def _read_ns_counter(netns, dev, counter):
    proc = _run(["ip", "netns", "exec", netns, "cat", f"/sys/class/net/{dev}/statistics/{counter}"])
    return proc.stdout.strip()


def _tail(text, lines=30):
    return "\n".join(text.rstrip().splitlines()[-lines:])


def remove_stale_namespaces():
    """Delete bpsn-<pid>-* namespaces whose creating process is gone (after a SIGKILL)."""
    proc = _run(["ip", "netns", "list"], check=False)
    removed = []
    for line in proc.stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name.startswith(NAME_PREFIX):
            continue
        pid_text = name[len(NAME_PREFIX):].split("-")[0]
        if not pid_text.isdigit() or os.path.exists(f"/proc/{pid_text}"):
            continue
        if _run(["ip", "netns", "del", name], check=False).returncode == 0:
            removed.append(name)
    return removed


@atexit.register
def _teardown_live_clusters():
    for cluster in list(_live_clusters):
        cluster.teardown(failed=True)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def install_sigterm_handler():
    """Make SIGTERM unwind like Ctrl-C so `with Cluster(...)` tears down (call from a main script)."""
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)


def measure_cells(groups, measure, describe, after_each=None):
    """The run loop of the benchmarks on emulated hosts. groups: [(Cluster
    keyword arguments, [cell])], a cell a dict naming one measurement; each
    group gets a fresh Cluster, each cell the record measure(cluster, cell)
    plus the cell's keys, printed with describe(record). A cell that fails is
    recorded with its error and the others still run. SIGTERM tears down like
    Ctrl-C; namespaces a killed earlier run left are removed first.
    after_each(records so far), if given, runs after every cell."""
    install_sigterm_handler()
    remove_stale_namespaces()
    records = []
    for cluster_args, cells in groups:
        with Cluster(**cluster_args) as cluster:
            for cell in cells:
                try:
                    record = dict(cell, **measure(cluster, cell))
                    print(describe(record), flush=True)
                except Exception as e:  # a failed cell is reported, the others still run
                    record = dict(cell, error=str(e)[-2000:])
                    where = " ".join(f"{k}={v}" for k, v in cell.items())
                    print(f"{where}: FAILED {record['error']}", file=sys.stderr, flush=True)
                records.append(record)
                if after_each:
                    after_each(records)
    return records
