"""The way into trainers that choose the process group's backend themselves.

Hugging Face Accelerate (and so the Hugging Face Trainer, built on it) picks
the backend of a CPU job from its own list and refuses any other name
("Your assigned backend byteps is not available, please use gloo"), but it
makes no group when one already exists. So the whole recipe is one line
before the trainer is built:

    import byteps_native.torch as bps
    bps.init_process_group()          # then Accelerator(cpu=True) / TrainingArguments(use_cpu=True)

docs/trainers.md cites the trainers' lines and gives each trainer's recipe.
"""
import torch.distributed as dist

from byteps_native.torch.backend import NAME


def init_process_group(**kwargs):
    """Makes the default process group on 'byteps' (env:// by default: the
    RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT that torchrun sets) unless
    it exists; returns it. `kwargs` go to
    torch.distributed.init_process_group (timeout, init_method, ...).

    Call it before the trainer makes its own group. A default group on any
    other backend already there is an error naming that backend, not a silent
    run on it: a trainer that made a gloo group first would otherwise train on
    gloo while the code says byteps."""
    if dist.is_initialized():
        backend = dist.get_backend()
        if backend != NAME:
            raise RuntimeError(
                f"byteps_native.torch.init_process_group: the default process group already exists on "
                f"'{backend}', not '{NAME}'; something (the trainer: Accelerator(), TrainingArguments, ...) "
                f"made it first. Call init_process_group() before building the trainer "
                f"(docs/trainers.md).")
        return dist.group.WORLD
    dist.init_process_group(NAME, **kwargs)
    return dist.group.WORLD
