"""What the trainer tests share: one torchrun launch of a recipe worker (the
reference run, gloo on CPU or nccl on GPUs, then the byteps run) and the
checks every recipe must pass. Results are {rank: {backend: findings}}."""
import os

from tests.support.jobs import torchrun
from tests.trainers import WORKERS

REFERENCE = {"cpu": "gloo", "cuda": "nccl"}
# What Accelerate says to the name 'byteps' on CPU, also where the HF Trainer's
# TrainingArguments(ddp_backend=...) hands it on (docs/trainers.md).
ACCELERATE_REFUSAL = "Your assigned backend byteps is not available, please use gloo"
# Small jobs: the warm staging pool at 8 MiB a rank (as bpslaunch jobs have
# it), nothing fetched from the Hugging Face Hub; on GPUs deterministic
# cuBLAS and no NVLink multicast (KINDS.md of the GPU machines).
JOB_ENV = {"BYTEPS_LOCAL_STAGING_RESERVE": str(8 << 20), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "NCCL_NVLS_ENABLE": "0"}


def launch(worker, tmp_path, device="cpu", scale=1, byteps_first=False, timeout=240):
    """Runs workers/<worker> on 2 ranks (one GPU each with device="cuda"),
    the reference then byteps (or byteps first), each on a process group of
    its own; returns {rank: {backend: findings}}."""
    plan = ",".join([REFERENCE[device], "byteps"][::-1 if byteps_first else 1])
    results_dir, scratch = os.path.join(tmp_path, "results"), os.path.join(tmp_path, "scratch")
    os.makedirs(results_dir)
    os.makedirs(scratch)
    args = ["--runs", plan, "--out", scratch, "--device", device, "--scale", str(scale)]
    return torchrun(os.path.join(WORKERS, worker), args=args, nproc=2, gpus=device == "cuda", result_dir=results_dir,
                    env=JOB_ENV, timeout=timeout).check(ranks=2).results


def reference(found):
    """The backend byteps is compared with in one rank's findings."""
    (name,) = [b for b in found if b != "byteps"]
    return name


def difference(expected, got):
    """'' when the two {name: [values]} are bitwise equal, else where they first differ."""
    if sorted(expected) != sorted(got):
        return f"parameter names differ: {sorted(expected)} vs {sorted(got)}"
    for name in expected:
        a, b = expected[name], got[name]
        if a != b:
            unequal = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
            if len(a) != len(b):
                return f"'{name}' has {len(a)} values vs {len(b)}"
            i = unequal[0]
            worst = max(abs(a[j] - b[j]) for j in unequal)
            return f"'{name}' differs at {len(unequal)} of {len(a)} elements (first [{i}]: {a[i]!r} vs {b[i]!r}; " \
                   f"max |diff| {worst:.3g})"
    return ""


def check_matches_reference(results, runs):
    """Each run's byteps parameters equal the reference's (gloo's) bitwise, on every rank."""
    for rank, found in results.items():
        ref = reference(found)
        for run in runs:
            diff = difference(found[ref][run], found["byteps"][run])
            assert not diff, f"rank {rank}, run '{run}': byteps's parameters are not {ref}'s: {diff}"


def check_moved(results, runs):
    """Training changed every parameter tensor (a run that did nothing cannot match by standing still)."""
    for rank, found in results.items():
        for backend in found:
            for run in runs:
                still = [n for n, v in found[backend][run].items() if v == found[backend]["initial"][n]]
                assert not still, f"rank {rank}, {backend} run '{run}': parameters never moved from their " \
                                  f"initial values: {still}"


def check_ranks_agree(results, runs):
    """DDP keeps the replicas equal: rank 1's parameters are rank 0's."""
    for backend in results[0]:
        for run in runs:
            diff = difference(results[0][backend][run], results[1][backend][run])
            assert not diff, f"{backend} run '{run}': rank 1's parameters are not rank 0's: {diff}"


def check_resume(results, backend="byteps"):
    """A run resumed from the checkpoint ends where the uninterrupted one did."""
    for rank, found in results.items():
        run = found[backend]
        assert run["resumed_steps"] == run["straight_steps"], run
        diff = difference(run["straight"], run["resumed"])
        assert not diff, f"rank {rank}, {backend}: the run resumed from its checkpoint ended elsewhere than " \
                         f"the uninterrupted one: {diff}"


def check_byteps_served(results, group_key="group"):
    """The byteps run's group is really 'byteps' (not a gloo fallback), its
    gradients went through the engine, and the engine's counters grew with
    every phase; the reference run was on its own backend and, when it ran
    first, never started the engine."""
    for rank, found in results.items():
        group = found["byteps"][group_key]
        assert group["backend"] == "byteps", f"rank {rank}: the byteps run's group is on {group['backend']!r}"
        assert group["backend_class"] not in ("ProcessGroupGloo", "ProcessGroupNCCL"), f"rank {rank}: {group}"
        assert any(".allreduce.f32." in name for name in group["engine_calls"]), \
            f"rank {rank}: no float32 all-reduce among the engine's latest calls: {group['engine_calls']}"
        run = found["byteps"]
        assert run["ops_after_straight"] is not None and run["ops_after_straight"] >= run["straight_steps"], \
            f"rank {rank}: {run['straight_steps']} optimizer steps but the engine completed " \
            f"{run['ops_after_straight']} collectives"
        assert run["ops_after_resumed"] > run["ops_after_straight"], \
            f"rank {rank}: the engine's counters did not grow in the resumed run " \
            f"({run['ops_after_straight']} -> {run['ops_after_resumed']})"
        ref = reference(found)
        assert found[ref]["group"]["backend"] == ref, f"rank {rank}: the reference run's group: {found[ref]['group']}"
        if list(found)[0] == ref:  # JSON keeps the order the runs came in
            assert found[ref]["ops_after_straight"] is None, \
                f"rank {rank}: the engine ran during the {ref} run: {found[ref]['ops_after_straight']} collectives"


def check_mixed_precision(results):
    """Both runs computed in bfloat16 (autocast), parameters staying float32."""
    for rank, found in results.items():
        for backend in found:
            assert found[backend]["forward_dtype"] == "torch.bfloat16", \
                f"rank {rank}, {backend}: the forward pass computed in {found[backend]['forward_dtype']}, " \
                f"not bfloat16: mixed precision is off"


def check_accumulation(results, steps):
    """Gradient accumulation over 2 batches: `steps` optimizer steps for twice
    as many batches, and on byteps exactly one gradient all-reduce through
    the engine per step (DDP skips the sync of the accumulating batches)."""
    for rank, found in results.items():
        for backend in found:
            assert found[backend]["straight_steps"] == steps, \
                f"rank {rank}, {backend}: {found[backend]['straight_steps']} optimizer steps, not {steps}"
        run = found["byteps"]
        gradient = f".allreduce.f32.{run['gradient_numel']}."
        reductions = [name for name in run["group"]["engine_calls"] if gradient in name]
        assert len(reductions) == steps, \
            f"rank {rank}: {len(reductions)} gradient all-reduces ({gradient}) through the engine for {steps} " \
            f"optimizer steps; its latest calls: {run['group']['engine_calls']}"
