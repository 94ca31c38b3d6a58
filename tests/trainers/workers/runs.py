"""What every trainer recipe worker shares: one torchrun launch runs the
recipe once per backend (gloo, the reference, then byteps), each run on a
process group of its own, and reports per run the trained parameters, the
group's backend and the engine's counters.

Why each run gets its own rendezvous: torch's default group keeps its keys in
the launcher's store under the same prefix every time, so a second
init_process_group over that store reads the first group's stale addresses.
Each run gets a fresh TCPStore on its own port (hosted by rank 0), passed by
the test."""
import argparse
import os

import torch
import torch.distributed as dist


def parse_runs():
    """--runs gloo:PORT,byteps:PORT -> [(backend, port)]; --out DIR (scratch:
    checkpoints)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runs = [(b, int(p)) for b, p in (item.split(":") for item in args.runs.split(","))]
    return runs, args.out


def fresh_rendezvous(port):
    """The next init_process_group (env://) meets on a new store at `port`:
    rank 0 hosts it, instead of the torchrun agent's store."""
    os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    os.environ["MASTER_PORT"] = str(port)


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


def group_facts():
    """What the default group really is: torch's name for its backend, the
    class of the object serving CPU tensors (ProcessGroupGloo on gloo), and on
    byteps the engine names of its latest collectives (the adapter answers
    only for its own backend objects)."""
    group = dist.group.WORLD
    served_by = group._get_backend(torch.device("cpu"))
    facts = {"backend": dist.get_backend(group), "cpu_backend_class": type(served_by).__name__,
             "engine_calls": None}
    if facts["backend"] == "byteps":
        from byteps_native.torch.extension import _c10d
        facts["engine_calls"] = [name for name, _ in _c10d.recent_engine_calls(served_by)]
    return facts


def parameters(module):
    """{name: [float, ...]}: float32 values are exact in JSON (as doubles)."""
    return {name: p.detach().float().reshape(-1).tolist() for name, p in module.named_parameters()}
