"""NumPy reference of the engine's compressors (csrc/compression/compressor.h),
written from the documented algorithm, not from the C++: what one worker sends
for a slice (with error feedback), what the server answers for a round, and
the engine's cut of a tensor into partitions with one local rank."""
import numpy as np

M64 = (1 << 64) - 1


def hash_name(name):
    h = 1469598103934665603
    for c in name.encode():
        h ^= c
        h = (h * 1099511628211) & M64
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & M64
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & M64
    h ^= h >> 33
    return h


def mix_key(name_hash, partition, slice_index):
    h = name_hash ^ ((partition * 0x9e3779b97f4a7c15) & M64) ^ ((slice_index * 0xc2b2ae3d27d4eb4f) & M64)
    h ^= h >> 29
    h = (h * 0xbf58476d1ce4e5b9) & M64
    h ^= h >> 32
    return h


def plan_partitions(count, partition_bytes, num_servers, elem_size=4):
    """csrc/common/partitioner.h PlanPartitions with one local rank."""
    parts = max(1, -(-count * elem_size // partition_bytes))
    if parts > 1 and num_servers > 1:
        parts = -(-parts // num_servers) * num_servers
    parts = min(parts, max(count, 1))
    per = -(-count // parts)
    aligned = max(16, -(-per // 16) * 16)
    return [(off, min(aligned, count - off)) for off in range(0, count, aligned)]


def random_indices(seed, key, rnd, n, k):
    state = key ^ ((seed << 32) & M64) ^ ((rnd * 0xD1B54A32D192ED03) & M64)

    def next_random():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    chosen = set()
    for j in range(n - k, n):  # Floyd's sampling
        t = next_random() % (j + 1)
        chosen.add(j if t in chosen else t)
    return np.array(sorted(chosen), dtype=np.int64)


def parse(spec):
    kind, _, options = spec.partition(":")
    opts = dict(item.split("=") for item in options.split(",") if item)
    return kind, float(opts.get("ratio", 0.01)), opts.get("ef", "1") == "1", int(opts.get("seed", 0))


def parse_momentum(spec):
    """(mu, nesterov) of the worker momentum (mu 0: none)."""
    opts = dict(item.split("=") for item in spec.partition(":")[2].split(",") if item)
    return float(opts.get("momentum", 0)), opts.get("nesterov", "1") == "1"


def k_of(n, ratio):
    return int(max(1.0, min(np.floor(n * ratio), n)))


def slice_cuts(segment_sizes, offset, count):
    """Where the declared segments (sizes of the fused tensors) end inside
    slice [offset, offset + count), relative to it: onebit's scale boundaries."""
    ends = np.cumsum([s for s in segment_sizes or () if s > 0])
    return [int(e - offset) for e in ends if offset < e < offset + count]


def compress(spec, c, key, rnd, cuts=(), k=None):
    """Returns decompress(compress(c)) as float32: what the wire carries, dense.
    onebit: one scale mean(|c|) per segment between `cuts`; topk: `k` (default
    from the ratio) largest."""
    kind, ratio, _, seed = parse(spec)
    n = c.size
    if kind == "onebit":
        out = np.empty(n, np.float32)
        for lo, hi in zip([0, *cuts], [*cuts, n]):
            part = c[lo:hi]
            scale = np.float32(np.abs(part.astype(np.float64)).sum() / part.size)
            out[lo:hi] = np.where(part < 0, -scale, scale)
        return out
    if kind == "topk":
        order = np.lexsort((np.arange(n), -np.abs(c)))  # |c| descending, ties to the lower index
        idx = np.sort(order[:k or k_of(n, ratio)])
    else:
        idx = random_indices(seed, key, rnd, n, k_of(n, ratio))
    out = np.zeros(n, np.float32)
    out[idx] = c[idx]
    return out


class Worker:
    """One machine's compressor state: a residual and a momentum per slice key."""

    def __init__(self, spec):
        self.spec = spec
        self.residual = {}
        self.momentum = {}

    def push(self, g, key, rnd, cuts=()):
        _, _, ef, _ = parse(self.spec)
        mu, nesterov = parse_momentum(self.spec)
        c = g.astype(np.float32)
        if mu:
            # m = mu m + g; what is compressed: g + mu m (nesterov) or m
            mu = np.float32(mu)
            m = (mu * self.momentum.get(key, np.zeros_like(c)) + c).astype(np.float32)
            self.momentum[key] = m
            c = (c + mu * m).astype(np.float32) if nesterov else m
        if ef:
            c = (self.residual.get(key, np.zeros_like(c)) + c).astype(np.float32)
        sent = compress(self.spec, c, key, rnd, cuts)
        if ef:
            self.residual[key] = (c - sent).astype(np.float32)
        return sent


def server_answer(spec, pushes, key, rnd, server_residual=None, cuts=()):
    """Decompressed pushes summed in float32 (arrival order), then compressed;
    with server_ef=1 the key's residual (a dict) is added first and updated.
    topk answers the top machines x k of the sum (all of it: each push has k
    entries at most), or with server_topk=1 the top k."""
    acc = pushes[0].copy()
    for p in pushes[1:]:
        acc = (acc + p).astype(np.float32)
    k = None
    kind, ratio, _, _ = parse(spec)
    if kind == "topk" and "server_topk=1" not in spec:
        k = min(acc.size, len(pushes) * k_of(acc.size, ratio))
    if "server_ef=1" not in spec:
        return compress(spec, acc, key, rnd, cuts, k)
    acc = (server_residual.get(key, np.zeros_like(acc)) + acc).astype(np.float32)
    sent = compress(spec, acc, key, rnd, cuts, k)
    server_residual[key] = (acc - sent).astype(np.float32)
    return sent


def job_result(spec, gradients_per_step, name, partition_bytes, num_servers, segments=None):
    """What every rank of a job of machines with one local rank each receives
    (sum) at every step; gradients_per_step[step][machine] is a float32 array;
    `segments`: the sizes of the tensors fused into it (onebit's scales)."""
    n = gradients_per_step[0][0].size
    workers = [Worker(spec) for _ in gradients_per_step[0]]
    server_residual = {}
    name_hash = hash_name(name)
    results = []
    for rnd, grads in enumerate(gradients_per_step):
        out = np.empty(n, np.float32)
        for p, (off, cnt) in enumerate(plan_partitions(n, partition_bytes, num_servers)):
            key = mix_key(name_hash, p, 0)
            cuts = slice_cuts(segments, off, cnt) if spec.startswith("onebit") else []
            pushes = [w.push(g[off:off + cnt], key, rnd, cuts) for w, g in zip(workers, grads)]
            out[off:off + cnt] = server_answer(spec, pushes, key, rnd, server_residual, cuts)
        results.append(out)
    return results
