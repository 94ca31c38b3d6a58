"""CrossBarrier (docs/cross_barrier.md): after N steps parameters and
optimizer state are bitwise those of the same script without it (SGD with
momentum and AdamW, foreach and not, two param groups, an LR scheduler,
gradient accumulation, the DDP face); state_dict() and no_grad evaluation
taken mid-training see every update due; clip_grad_norm_ and GradScaler are
refused at once without synchronize() and exact with it -- and the engine's
timeline shows the next forward pass running before the last sum of the step
arrived, which a cross-barrier that kept the barrier could not show.

CPU: two emulated machines of one rank (colocated servers, TCP). The same
cases run on GPUs at 1x2 and 2x1 where CUDA is present."""
import json
import os

import pytest
import torch

from tests.support.jobs import bare_ranks, torchrun
from tests.torch import WORKERS

WORKER = os.path.join(WORKERS, "cross_barrier.py")


def _gpu_marks(n):
    from tests.gpu.gpu_env import GPUS, engine_has_cuda
    return [pytest.mark.skipif(GPUS < n, reason=f"needs {n} CUDA GPUs (this host has {GPUS})"),
            pytest.mark.skipif(GPUS >= n and not engine_has_cuda(), reason="byteps-native built without CUDA")]


LAYOUTS = [pytest.param(("cpu", 2, 1), id="cpu-2x1"),
           pytest.param(("cuda", 1, 2), id="cuda-1x2", marks=_gpu_marks(2)),
           pytest.param(("cuda", 2, 1), id="cuda-2x1", marks=_gpu_marks(2))]


@pytest.fixture(scope="module", params=LAYOUTS)
def job(request, tmp_path_factory):
    device, machines, local = request.param
    out = tmp_path_factory.mktemp(f"cross_barrier_{device}_{machines}x{local}")
    traces = out / "traces"
    finished = torchrun(WORKER, [device], nproc=local, machines=machines, result_dir=out, timeout=300,
                        gpus=device == "cuda",
                        env={"BYTEPS_TRACE_ON": "1", "BYTEPS_TRACE_DIR": str(traces), "BYTEPS_TIMEOUT": "30",
                             "NCCL_NVLS_ENABLE": "0"},
                        machine_env=(lambda m: {"GPU_OFFSET": str(m * local)}) if machines > 1 else None)
    finished.check(ranks=machines * local)
    return finished.results, traces, device


@pytest.mark.parametrize("kind", ["sgd", "sgd_foreach", "adamw", "adamw_foreach", "accumulate", "sync_after_step"])
def test_bitwise_as_without_cross_barrier(job, kind):
    results = job[0]
    for rank, r in sorted(results.items()):
        assert r["exact"][kind] == {"params": True, "state": True, "optimizer_state": True, "model_state": True,
                                    "eval": True}, f"rank {rank}: {r['exact'][kind]}"


def test_ddp_face_bitwise_as_plain_ddp(job):
    results = job[0]
    for rank, r in sorted(results.items()):
        assert r["ddp"]["state"], f"rank {rank}: CrossBarrier(DDP(model)) differs from plain DDP"


def test_clip_and_grad_scaler(job):
    results = job[0]
    for rank, r in sorted(results.items()):
        c = r["clip_and_scaler"]
        for what in ("clip_refused", "scaler_refused"):
            assert c[what].startswith("RuntimeError") and "optimizer.synchronize()" in c[what], (rank, what, c[what])
        assert "being summed across ranks" in c["clip_refused"], c["clip_refused"]
        assert c["params"], f"rank {rank}: synchronize + clip_grad_norm_ + GradScaler differs from the reference"


def test_optimizer_with_group_state_refused(job):
    results = job[0]
    for rank, r in sorted(results.items()):
        assert "keeps state per group" in r["group_state"]["refused"], r["group_state"]["refused"]


def _last_sum_per_step(trace_dir, rank, prefix):
    """When the last sum of each step arrived on `rank`: the latest end of any
    timeline event of the step's round of any tensor named `prefix`*."""
    with open(os.path.join(str(trace_dir), f"rank{rank}.json")) as f:
        events = json.load(f)["traceEvents"]
    by_tensor = {}
    for e in events:
        if e.get("ph") != "X" or not e["args"]["tensor"].startswith(prefix):
            continue
        rounds = by_tensor.setdefault(e["args"]["tensor"], {})
        rounds[e["args"]["step"]] = max(rounds.get(e["args"]["step"], 0), (e["ts"] + e["dur"]) / 1e6)
    if not by_tensor:
        return None
    steps = {}
    for rounds in by_tensor.values():
        for k, r in enumerate(sorted(rounds)):
            steps[k] = max(steps.get(k, 0), rounds[r])
    return [steps[k] for k in sorted(steps)]


def test_next_forward_starts_before_the_last_sum(job):
    results, traces, device = job
    report = []
    for rank, r in sorted(results.items()):
        for which in ("ref", "cb"):
            prefix = f"CrossBarrier.grad.timing_{which}." if which == "cb" else f"DistributedOptimizer.grad.timing_{which}."
            last = _last_sum_per_step(traces, rank, prefix)
            if last is None and device == "cuda":
                pytest.skip(f"the engine wrote no timeline events for {prefix}* on rank {rank}: on this GPU layout "
                            "BYTEPS_TRACE_ON records no stage of these tensors (the exactness cases still ran)")
            assert last is not None, f"no timeline events for {prefix}* in rank{rank}.json"
            first_layer = r["timing"][which]
            assert len(first_layer) == len(last), (rank, which, first_layer, last)
            # Step k+1's first layer against step k's last sum, in ms (< 0: ran before it arrived).
            lead = [round((first_layer[k + 1] - last[k]) * 1000, 2) for k in range(len(last) - 1)]
            report.append((rank, which, lead))
    for rank, which, lead in report:
        if which == "ref":  # the barrier: never before
            assert all(d >= 0 for d in lead), f"rank {rank}: the reference ran ahead of its sums?! {report}"
        else:
            crossed = sum(d < 0 for d in lead)
            assert crossed >= len(lead) // 2, (
                f"rank {rank}: the next forward ran before the step's last sum in only {crossed} of {len(lead)} "
                f"steps (ms after the last sum per step, by rank and run): {report}")


def test_closure_optimizer_refused_at_construction():
    import byteps_native.torch as bps
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="LBFGS: its step\\(\\) needs a closure"):
        bps.CrossBarrier(model, torch.optim.LBFGS(model.parameters()))


@pytest.mark.parametrize("victim", [1, 0])
def test_dead_rank_named_within_seconds(tmp_path, victim):
    """As tests/torch/test_dead_rank.py, under CrossBarrier: the survivor is
    blocked in a forward pre-hook on updates that need the dead rank's sums."""
    timeout_s = 5
    procs, results = bare_ranks(os.path.join(WORKERS, "cross_barrier_dead_rank.py"), nproc=2, args=[victim],
                                env={"BYTEPS_TIMEOUT": str(timeout_s)}, timeout=90, result_dir=tmp_path)
    survivor = 1 - victim
    assert procs[victim].returncode == 3, procs[victim].output[-3000:]
    assert survivor in results, f"survivor reported nothing:\n{procs[survivor].output[-5000:]}"
    r = results[survivor]
    assert r["error"] is not None, f"the survivor trained on although rank {victim} died: {r}"
    assert r["step"] == 3 and r["seconds"] is not None, r  # failed in step 3's forward, not later
    assert "CrossBarrier" in r["error"] and f"local rank {victim}" in r["error"] and "died" in r["error"], r
    assert r["seconds"] < timeout_s, r
