"""The codecs' CUDA kernels (csrc/compression/*.cu, device_codec.h) against
the host codecs, byte by byte, on the same input and state (issue 39):
onebit's sign bits exactly and its scales to float32 rounding, topk's
indices and values, randomk's values and (through decoding) its indices,
the error-feedback residuals and worker momentum, and decoding on the device
against the host's.

The engine does not call the device codecs yet, and its library exports only
the C ABI, so this test compiles tests/gpu/device_codec_probe.cu with the
codecs' sources by nvcc into a small library and calls it through ctypes.
It needs a GPU and nvcc (BYTEPS_CUDA_HOME, else nvcc on PATH); CI has
neither and skips it. tests/cpp/compression_agreement_test.cc checks the
kernels' per-element code on the host on every CI run."""
import ctypes
import glob
import os
import shutil
import subprocess

import numpy as np
import pytest

from tests.gpu.gpu_env import GPUS, NO_GPU

if GPUS == 0:
    pytest.skip(NO_GPU, allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")
HEADER_BYTES = 16


def _nvcc():
    home = os.environ.get("BYTEPS_CUDA_HOME")
    if home:
        return os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    nvcc = _nvcc()
    if not nvcc or not os.path.exists(nvcc):
        pytest.skip("no nvcc (set BYTEPS_CUDA_HOME or put nvcc on PATH) to build the device codec probe")
    out = str(tmp_path_factory.mktemp("probe") / "libdevice_codec_probe.so")
    sources = ([os.path.join(ROOT, "tests", "gpu", "device_codec_probe.cu")] +
               sorted(glob.glob(os.path.join(CSRC, "compression", "*.cu"))) +
               sorted(glob.glob(os.path.join(CSRC, "compression", "*.cc"))))
    subprocess.run([nvcc, "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC", "-I" + CSRC,
                    "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
                    "-gencode=arch=compute_90,code=compute_90", *sources, "-o", out], check=True)
    lib = ctypes.CDLL(out)
    lib.bps_probe_payload_bytes.restype = ctypes.c_longlong
    lib.bps_probe_payload_bytes.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32]
    return lib


def _ptr(array):
    return array.ctypes.data_as(ctypes.c_void_p)


def compress_both(lib, spec, x, cuts=(), key=7, round_=3, residual=None, momentum=None):
    n = x.size
    cuts = np.asarray(cuts, dtype=np.uint32)
    size = lib.bps_probe_payload_bytes(spec.encode(), n, cuts.size)
    assert size > 0, spec
    residual = np.zeros(n, np.float32) if residual is None else residual.astype(np.float32)
    momentum = np.zeros(n, np.float32) if momentum is None else momentum.astype(np.float32)
    host, device = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    states = [np.zeros(n, np.float32) for _ in range(4)]
    error = ctypes.create_string_buffer(512)
    rc = lib.bps_probe_compress(spec.encode(), _ptr(x), ctypes.c_uint32(n), _ptr(cuts), ctypes.c_uint32(cuts.size),
                                ctypes.c_uint64(key), ctypes.c_uint32(round_), _ptr(residual), _ptr(momentum),
                                _ptr(host), _ptr(device), *[_ptr(s) for s in states], error, 512)
    assert rc == 0, error.value.decode()
    host_residual, device_residual, host_momentum, device_momentum = states
    return host, device, (host_residual, device_residual), (host_momentum, device_momentum)


def decompress_both(lib, payload, n, key=7, round_=3):
    acc = np.linspace(-1, 1, n, dtype=np.float32)
    outs = [np.zeros(n, np.float32) for _ in range(4)]
    error = ctypes.create_string_buffer(512)
    rc = lib.bps_probe_decompress(_ptr(payload), ctypes.c_uint64(payload.size), ctypes.c_uint64(key),
                                  ctypes.c_uint32(round_), _ptr(acc), *[_ptr(o) for o in outs], error, 512)
    assert rc == 0, error.value.decode()
    return outs


def gradient(n, seed, ties=False):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    if ties:
        x = np.round(x * 4) / 4  # many equal magnitudes: the tie rule decides topk
    if n > 1:
        x[1] = -0.0
    return x.astype(np.float32)


SIZES = [1, 31, 33, 1000, 65536 * 3 + 5, (1 << 21) + 3]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("segmented", [False, True])
def test_onebit_sign_bits_exact_and_scales_to_float32_rounding(probe, n, segmented):
    cuts = [5, 40, n // 2, n - 1] if segmented and n > 100 else []
    x = gradient(n, n)
    residual = gradient(n, n + 1) * 0.1
    host, device, (hr, dr), _ = compress_both(probe, "onebit", x, cuts, residual=residual)
    scales_at = HEADER_BYTES + 4 * len(cuts)
    signs_at = scales_at + 4 * (len(cuts) + 1)
    assert bytes(host[:scales_at]) == bytes(device[:scales_at]), "header and boundaries"
    assert bytes(host[signs_at:]) == bytes(device[signs_at:]), "sign bits"
    hs = host[scales_at:signs_at].view(np.float32)
    ds = device[scales_at:signs_at].view(np.float32)
    np.testing.assert_allclose(ds, hs, rtol=2.5e-7, atol=0)
    # The residual is c - (+-scale): off by the scales' difference (and its
    # rounding), exact where the scales are equal.
    np.testing.assert_allclose(dr, hr, rtol=1e-6, atol=2 * float(np.max(np.abs(hs - ds))) + 1e-30)
    if np.array_equal(hs, ds):
        assert bytes(hr.view(np.uint8)) == bytes(dr.view(np.uint8))
    # Decoding the host's payload on the device: identical floats.
    host_out, device_out, host_acc, device_acc = decompress_both(probe, host, n)
    assert bytes(host_out.view(np.uint8)) == bytes(device_out.view(np.uint8))
    assert bytes(host_acc.view(np.uint8)) == bytes(device_acc.view(np.uint8))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("ratio", ["0.001", "0.01", "0.5"])
def test_topk_indices_values_and_residual_exact(probe, n, ties, ratio):
    x = gradient(n, n + 2, ties)
    host, device, (hr, dr), _ = compress_both(probe, f"topk:ratio={ratio}", x)
    assert bytes(host) == bytes(device), "topk payload (indices, then values)"
    assert bytes(hr.view(np.uint8)) == bytes(dr.view(np.uint8)), "error-feedback residual"
    host_out, device_out, host_acc, device_acc = decompress_both(probe, host, n)
    assert bytes(host_out.view(np.uint8)) == bytes(device_out.view(np.uint8))
    assert bytes(host_acc.view(np.uint8)) == bytes(device_acc.view(np.uint8))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("ratio", ["0.01", "0.5"])
def test_randomk_indices_and_values_exact(probe, n, ratio):
    # Distinct values: the decoded slices show the indices each side derived.
    x = (np.arange(n, dtype=np.float32) + 1) * np.float32(0.5)
    for round_ in range(3):
        spec = f"randomk:ratio={ratio},seed=11"
        host, device, (hr, dr), _ = compress_both(probe, spec, x, round_=round_)
        assert bytes(host) == bytes(device), "randomk values"
        assert bytes(hr.view(np.uint8)) == bytes(dr.view(np.uint8)), "error-feedback residual"
        host_out, device_out, host_acc, device_acc = decompress_both(probe, host, n, round_=round_)
        assert np.array_equal(np.nonzero(host_out)[0], np.nonzero(device_out)[0]), "randomk indices"
        assert bytes(host_out.view(np.uint8)) == bytes(device_out.view(np.uint8))
        assert bytes(host_acc.view(np.uint8)) == bytes(device_acc.view(np.uint8))


@pytest.mark.parametrize("spec", ["topk:ratio=0.01,momentum=0.9", "randomk:ratio=0.05,momentum=0.9,nesterov=0",
                                  "onebit:momentum=0.9,ef=0"])
def test_worker_momentum_and_error_feedback_state(probe, spec):
    n = 100003
    x = gradient(n, 9)
    host, device, (hr, dr), (hm, dm) = compress_both(
        probe, spec, x, residual=gradient(n, 10) * 0.01, momentum=gradient(n, 11) * 0.1)
    assert bytes(hm.view(np.uint8)) == bytes(dm.view(np.uint8)), "momentum"
    if spec.startswith("onebit"):
        assert bytes(host[:HEADER_BYTES]) == bytes(device[:HEADER_BYTES])
        assert bytes(host[HEADER_BYTES + 4:]) == bytes(device[HEADER_BYTES + 4:]), "sign bits"
    else:
        assert bytes(host) == bytes(device)
        assert bytes(hr.view(np.uint8)) == bytes(dr.view(np.uint8))
