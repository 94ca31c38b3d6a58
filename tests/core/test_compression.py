"""Compression through the servers (issue 29), in real jobs (bpslaunch,
processes, sockets): every compressor against the NumPy reference of the same
algorithm (tests/core/compression_reference.py) over several steps, so the
workers' error feedback and the servers' decompress-sum-compress are both
checked; the size threshold; exact sums where the compressor loses nothing
(several local ranks, partitions and servers); the wire bytes; and ranks that
disagree on the compressor failing on every rank with the cause."""
import numpy as np
import pytest

from tests.core.compression_reference import job_result, plan_partitions
from tests.support.jobs import bpslaunch_source

STEPS = 4
N = 50000  # 200 kB: 4 partitions of 64 kB over 2 servers

EXACT_AGAINST_REFERENCE = """
import numpy as np
import byteps_native.core as bps
bps.init()
r = bps.rank()
outs = []
for step in range(STEPS):
    g = np.random.default_rng(1000 * step + r).standard_normal(N).astype(np.float32)
    bps.push_pull(g, name="grad.w", average=False, compression=SPEC)
    outs.append(g.tolist())
small = np.full(100, float(r + 1), np.float32)  # 400 bytes: below BYTEPS_MIN_COMPRESS_BYTES
bps.push_pull(small, name="grad.bias", average=False, compression=SPEC)
report({"outs": outs, "small": small.tolist(), "stats": bps.stats()})
bps.shutdown()
"""


@pytest.mark.parametrize("spec", ["onebit", "onebit:ef=0", "topk:ratio=0.01", "randomk:ratio=0.05,seed=3",
                                  "onebit:momentum=0.9", "topk:ratio=0.01,momentum=0.8,nesterov=0",
                                  "onebit:momentum=0.9,server_ef=1", "topk:ratio=0.01,server_topk=1",
                                  "topk:ratio=0.01,momentum=0.9,server_ef=1,server_topk=1"])
def test_each_compressor_matches_the_numpy_reference_across_steps(tmp_path, spec):
    script = EXACT_AGAINST_REFERENCE.replace("STEPS", str(STEPS)).replace("N", str(N)).replace("SPEC", repr(spec))
    results = bpslaunch_source(tmp_path, script, machines=2, servers=2,
                               env={"BYTEPS_PARTITION_BYTES": str(64 * 1024)}).results
    grads = [[np.random.default_rng(1000 * step + r).standard_normal(N).astype(np.float32) for r in range(2)]
             for step in range(STEPS)]
    expect = job_result(spec, grads, "grad.w", 64 * 1024, 2)
    for rank, res in results.items():
        for step in range(STEPS):
            got = np.array(res["outs"][step], np.float32)
            # onebit's scale is summed in double precision in another order: a float32 ulp at most
            np.testing.assert_allclose(got, expect[step], rtol=2e-6, atol=1e-6,
                                       err_msg=f"{spec} rank {rank} step {step}")
        assert res["small"] == [3.0] * 100  # uncompressed: the exact sum
        # one local rank: each rank pushes every partition of grad.w, compressed
        assert res["stats"]["compressed_pushes"] == STEPS * len(plan_partitions(N, 64 * 1024, 2)) == STEPS * 4
    # Lossy, yet not the uncompressed sum: the reference is really compressing.
    assert not np.allclose(expect[0], grads[0][0] + grads[0][1], atol=1e-3)


# A fused tensor of parts whose gradients differ by orders of magnitude, cut
# at offsets that are not multiples of 8 (onebit's sign bytes) and across
# partition boundaries (12,500 elements each).
SEGMENTS = [3, 1000, 17, 20000, 13, 8963, 20004]
SEGMENT_SCALES = [1.0, 0.01, 3.0, 0.001, 10.0, 0.1, 1e-4]

SEGMENTED = """
import numpy as np
import byteps_native.core as bps
bps.init()
r = bps.rank()
bps.declare_compression("grad.w", SPEC, segments=SEGMENTS)
scale = np.repeat(np.array(SEGMENT_SCALES, np.float32), SEGMENTS)
outs = []
for step in range(STEPS):
    g = np.random.default_rng(1000 * step + r).standard_normal(N).astype(np.float32) * scale
    bps.push_pull(g, name="grad.w", average=False)
    outs.append(g.tolist())
report({"outs": outs})
bps.shutdown()
"""


@pytest.mark.parametrize("spec", ["onebit", "onebit:momentum=0.9,server_ef=1"])
def test_onebit_keeps_a_scale_per_declared_segment(tmp_path, spec):
    """A fused tensor (a DDP bucket) declared with its parts' sizes: one scale
    per part inside each partition slice, on the workers and the servers."""
    script = (SEGMENTED.replace("SEGMENT_SCALES", repr(SEGMENT_SCALES)).replace("SEGMENTS", repr(SEGMENTS))
              .replace("STEPS", str(STEPS)).replace("SPEC", repr(spec)).replace("N", str(N)))
    results = bpslaunch_source(tmp_path, script, machines=2, servers=2,
                               env={"BYTEPS_PARTITION_BYTES": str(64 * 1024)}).results
    scale = np.repeat(np.array(SEGMENT_SCALES, np.float32), SEGMENTS)
    grads = [[np.random.default_rng(1000 * step + r).standard_normal(N).astype(np.float32) * scale
              for r in range(2)] for step in range(STEPS)]
    expect = job_result(spec, grads, "grad.w", 64 * 1024, 2, segments=SEGMENTS)
    one_scale = job_result(spec, grads, "grad.w", 64 * 1024, 2)
    for rank, res in results.items():
        for step in range(STEPS):
            np.testing.assert_allclose(np.array(res["outs"][step], np.float32), expect[step], rtol=2e-6, atol=1e-9,
                                       err_msg=f"{spec} rank {rank} step {step}")
    # The segments matter: the small parts' answer is far from one scale per slice's.
    small = slice(1020, 21020)
    assert np.abs(one_scale[0][small]).mean() > 3 * np.abs(expect[0][small]).mean()


SEGMENTS_DISAGREE = """
import numpy as np
import byteps_native.core as bps
bps.init()
r = bps.rank()
bps.declare_compression("grad.w", "onebit", segments=[[500, 99500], [501, 99499]][r])
try:
    bps.push_pull(np.ones(100000, np.float32), name="grad.w")
    report({"error": None})
except bps.BytePSError as e:
    report({"error": str(e)})
bps.shutdown()
"""


def test_ranks_that_disagree_on_segments_fail_on_every_rank(tmp_path):
    results = bpslaunch_source(tmp_path, SEGMENTS_DISAGREE, machines=2, servers=1, check=False,
                               env={"BYTEPS_TIMEOUT": "30"}).results
    assert sorted(results) == [0, 1]
    for rank, res in results.items():
        assert "grad.w" in res["error"] and "different parts for onebit's scales" in res["error"], (rank, res)


def test_segments_that_miss_the_tensor_size_are_refused(tmp_path):
    script = """
import numpy as np
import byteps_native.core as bps
bps.init()
bps.declare_compression("grad.b", "onebit", segments=[50000, 50001])
try:
    bps.push_pull(np.ones(100000, np.float32), name="grad.b")
    report({"error": None})
except (bps.BytePSError, ValueError) as e:
    report({"error": str(e)})
bps.shutdown()
"""
    results = bpslaunch_source(tmp_path, script, machines=2, servers=1, check=False,
                               env={"BYTEPS_TIMEOUT": "30"}).results
    assert sorted(results) == [0, 1]
    for res in results.values():
        assert "has 100000 elements but its compression declares segments ending at 100001" in res["error"], res


LOSSLESS_CASES = """
import numpy as np
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
# onebit of a constant tensor is the tensor: the sum is exact whatever the slicing.
c = np.full(300001, 0.25 * (r + 1), np.float32)
bps.push_pull(c, name="const", average=True, compression="onebit")
# topk of a tensor sparser than k in every slice sends all of it.
s = np.zeros(200003, np.float32)
s[::1000] = r + 1
bps.push_pull(s, name="sparse", average=False, compression="topk:ratio=0.05")
report({"const": [float(c.min()), float(c.max())], "sparse_ok": bool(np.array_equal(s[::1000], np.full(s[::1000].size, n * (n + 1) / 2, np.float32))),
        "sparse_rest": float(np.abs(np.delete(s, np.arange(0, s.size, 1000))).max()), "stats": bps.stats()})
bps.shutdown()
"""


def test_several_local_ranks_partitions_and_servers(tmp_path):
    results = bpslaunch_source(tmp_path, LOSSLESS_CASES, machines=2, local_workers=2, servers=2,
                               env={"BYTEPS_PARTITION_BYTES": str(256 * 1024)}).results
    n = 4
    want = 0.25 * (n + 1) / 2
    for rank, res in results.items():
        assert res["const"] == [want, want], (rank, res["const"])
        assert res["sparse_ok"] and res["sparse_rest"] == 0.0, rank
        assert res["stats"]["compressed_pushes"] > 0


WIRE_BYTES = """
import numpy as np
import byteps_native.core as bps
bps.init()
g = np.random.default_rng(bps.rank()).standard_normal(1 << 20).astype(np.float32)  # 4 MiB
def pushed(name, compression, counter="bytes_pushed"):
    before = bps.stats()[counter]
    for _ in range(3):
        bps.push_pull(g.copy(), name=name, compression=compression)
    return (bps.stats()[counter] - before) / 3
report({"none": pushed("plain", None), "onebit": pushed("ob", "onebit"),
        "topk": pushed("tk", "topk:ratio=0.01"), "randomk": pushed("rk", "randomk:ratio=0.01"),
        "topk_answer": pushed("tka", "topk:ratio=0.01", "bytes_pulled"),
        "server_topk_answer": pushed("tks", "topk:ratio=0.01,server_topk=1", "bytes_pulled")})
bps.shutdown()
"""


def test_wire_bytes_per_step(tmp_path):
    results = bpslaunch_source(tmp_path, WIRE_BYTES, machines=2, servers=1).results
    for res in results.values():
        assert res["none"] == 4 << 20
        assert res["none"] / res["onebit"] >= 20, res
        assert res["none"] / res["topk"] >= 40, res
        assert res["none"] / res["randomk"] >= 80, res
        # topk's answer: the exact sum, machines x k entries (2 here); with server_topk=1, k
        header = 16 * -(-(4 << 20) // 256000)  # a codec header per partition (host tensors' default with servers: 256000 B)
        assert res["topk_answer"] - header == 2 * (res["topk"] - header), res
        assert res["server_topk_answer"] == res["topk"], res
    print("wire bytes per step and rank:", results[0])


DISAGREE = """
import numpy as np
import byteps_native.core as bps
bps.init()
r = bps.rank()
g = np.ones(100000, np.float32)
try:
    bps.push_pull(g, name="grad.w", compression=SPECS[r])
    report({"error": None})
except bps.BytePSError as e:
    report({"error": str(e)})
bps.shutdown()
"""


@pytest.mark.parametrize("specs,causes", [
    (["onebit", "topk:ratio=0.01"], ["ranks disagree on this tensor's compression: rank", "onebit", "topk (k=1000)"]),
    (["onebit", None], ["compresses it", "sends it uncompressed", "declare the same compression"]),
    (["topk:ratio=0.01", "topk:ratio=0.02"], ["topk (k=1000)", "topk (k=2000)"]),
    (["onebit:momentum=0.9", "onebit"], ["with error feedback and nesterov momentum", "onebit with error feedback"]),
])
def test_ranks_that_disagree_fail_on_every_rank(tmp_path, specs, causes):
    # One partition holds the tensor, so k is 1% of all of it.
    results = bpslaunch_source(tmp_path, DISAGREE.replace("SPECS", repr(specs)), machines=2, servers=1, check=False,
                               env={"BYTEPS_TIMEOUT": "30", "BYTEPS_PARTITION_BYTES": "400000"}).results
    assert sorted(results) == [0, 1]
    for rank, res in results.items():
        assert res["error"] and "grad.w" in res["error"], (rank, res["error"])
        for cause in causes:
            assert cause in res["error"], (rank, cause, res["error"])


def test_bad_spec_is_refused_at_declaration(tmp_path):
    script = """
import byteps_native.core as bps
bps.init()
try:
    bps.declare_compression("w", "twobit")
    report({"error": None})
except ValueError as e:
    report({"error": str(e)})
bps.shutdown()
"""
    results = bpslaunch_source(tmp_path, script, machines=1).results
    assert "unknown compressor 'twobit'" in results[0]["error"]
