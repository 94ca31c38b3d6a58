"""What every trainer recipe worker shares: one torchrun launch runs the
recipe once per backend (the reference, gloo on CPU or nccl on GPUs, then
byteps), each run on a process group of its own, and reports per run the
trained parameters, the group's backend, the engine's counters and the
seconds the uninterrupted run took.

--device cuda (one GPU per rank, deterministic kernels) is for
tests/gpu/test_trainers_gpu.py and benchmarks/gpu_trainers.py, --scale N (N
times the samples and the width) for the latter; the CI tests run
--device cpu --scale 1.

Why each run gets its own rendezvous: torch's default group keeps its keys in
the launcher's store under the same prefix every time, so a second
init_process_group over that store reads the first group's stale addresses.
Each run gets a fresh TCPStore, hosted by rank 0 on a port the kernel picks
while binding it (no port chosen ahead that something else could take), made
known through torchrun's own store."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

LAUNCHER_PORT = os.environ.get("MASTER_PORT")  # torchrun's store, before a run points MASTER_PORT elsewhere
_run_stores = []  # rank 0's: each run's store lives as long as the process



SHARE_GPU = os.environ.get("TEST_SHARE_GPU") == "1"
MACHINES = 2 if SHARE_GPU else 1  # the 2 ranks' layout: 1 x 2, or 2 x 1 when sharing one GPU

def parse_runs():
    """--runs gloo,byteps -> .backends; --out DIR (scratch: checkpoints);
    --device cpu|cuda; --scale N."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args()
    args.backends = args.runs.split(",")
    if args.device == "cuda":
        # One GPU per rank, set before any group is made (NCCL and byteps
        # bind to the current device); kernels that sum in a fixed order, so
        # two backends' runs can be compared bitwise.
        if SHARE_GPU:
            # A one-GPU lease trying the recipes (tests/gpu/gpu_env.py): each
            # rank becomes a machine of its own (2 x 1) on that GPU, since the
            # trainers put local rank i on cuda:i. NCCL refuses two ranks of
            # one host on one device ("Duplicate GPU detected"), so each names
            # its own host and NCCL joins them over its socket transport.
            rank = os.environ["RANK"]
            os.environ.update(LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", GROUP_RANK=rank, NODE_RANK=rank,
                              GROUP_WORLD_SIZE=os.environ["WORLD_SIZE"],
                              NCCL_HOSTID=f"shared-gpu-machine{rank}")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    return args


def fresh_rendezvous(run):
    """The next init_process_group (env://) meets on a new store: rank 0
    hosts it, every rank connects to it as a client (as torchrun's workers
    do to the agent's store); `run` numbers the runs of this launch."""
    launcher = dist.TCPStore(os.environ["MASTER_ADDR"], int(LAUNCHER_PORT), is_master=False,
                             timeout=datetime.timedelta(seconds=120))
    key = f"tests.trainers/run{run}/store_port"
    if int(os.environ["RANK"]) == 0:
        store = dist.TCPStore(os.environ["MASTER_ADDR"], 0, int(os.environ["WORLD_SIZE"]), is_master=True,
                              wait_for_workers=False)
        _run_stores.append(store)
        launcher.set(key, str(store.port))
    os.environ["MASTER_PORT"] = launcher.get(key).decode()
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"


def run_all(run, after_each=None):
    """A recipe worker's main: `run(backend, opts)` once per backend of
    --runs, each on its own rendezvous and group, then the report of all of
    them; `after_each()` resets what the trainer keeps per process."""
    from tests.support.results import report
    opts = parse_runs()
    found = {}
    for index, backend in enumerate(opts.backends):
        fresh_rendezvous(index)
        found[backend] = run(backend, opts)
        if after_each:
            after_each()
        end_run()
    report(found)


def end_run():
    """Destroys the run's default group, so the next run makes its own."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def engine_ops():
    """Collectives this process's engine completed; None before the engine
    started (a run that never reached 'byteps')."""
    import byteps_native.core as core
    if not core.initialized():
        return None
    return core.stats()["ops_completed"]


def group_facts(device="cpu"):
    """What the default group really is: torch's name for its backend, the
    class of the object serving `device`'s tensors (ProcessGroupGloo on gloo),
    and on byteps the engine names of its latest collectives (the adapter
    answers only for its own backend objects)."""
    group = dist.group.WORLD
    served_by = group._get_backend(torch.device(device))
    facts = {"backend": dist.get_backend(group), "backend_class": type(served_by).__name__,
             "engine_calls": None}
    if facts["backend"] == "byteps":
        from byteps_native.torch.extension import _c10d
        facts["engine_calls"] = [name for name, _ in _c10d.recent_engine_calls(served_by)]
    return facts


def gradient_numel(module):
    """Elements of the gradients DDP reduces each step (one bucket, at these sizes)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def parameters(module):
    """{name: [float, ...]}: float32 values are exact in JSON (as doubles).
    An FSDP-wrapped module (pass the wrapper) is gathered whole on every rank
    first, its names without FSDP's prefix, so a sharded run compares with the
    unsharded ones and rank 1 with rank 0; a DDP wrapper is looked through."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(module, DistributedDataParallel):
        module = module.module

    def values():
        return {name.replace("_fsdp_wrapped_module.", ""): p.detach().float().cpu().reshape(-1).tolist()
                for name, p in module.named_parameters()}
    if not FullyShardedDataParallel.fsdp_modules(module):
        return values()
    with FullyShardedDataParallel.summon_full_params(module, writeback=False):
        return values()
