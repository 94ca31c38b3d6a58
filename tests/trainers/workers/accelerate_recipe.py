"""Hugging Face Accelerate on a named backend: the recipe of docs/trainers.md,
run on the reference backend and then on byteps in one launch (runs.py).

Per backend: an Accelerator with bf16 mixed precision and gradient
accumulation over 2 batches, 2 epochs, once straight through (saving its
state after epoch 1) and once by a new Accelerator that loads that state
into fresh objects and trains epoch 2; then an Accelerator given an FSDP
plugin (on CPU, Accelerate wraps DDP instead: its type is reported). On
byteps the group is made first by byteps_native.torch.init_process_group,
because Accelerate refuses the name on CPU: what Accelerate says to the name
itself is reported too, so the test notices when the refusal goes."""
import os
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from accelerate.utils import DataLoaderConfiguration, FullyShardedDataParallelPlugin, InitProcessGroupKwargs
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import byteps_native.torch as bps
from tests.trainers.workers import runs

ACCUMULATE = 2
BATCH = 4


class StepCount:
    """Optimizer steps taken, saved and loaded with the Accelerator's state
    (register_for_checkpointing), so a resumed run knows where it stands."""

    def __init__(self):
        self.steps = 0

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]


def optimizer_of(model):
    return torch.optim.Adam(model.parameters(), lr=1e-2)


def build(scale, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 32 * scale), nn.Tanh(), nn.Linear(32 * scale, 4))
    return model, optimizer_of(model)


def loader(scale):
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(32 * scale, 16, generator=g), torch.randn(32 * scale, 4, generator=g))
    return DataLoader(data, batch_size=BATCH, shuffle=True)


def accelerator(device, **kwargs):
    AcceleratorState._reset_state(reset_partial_state=True)  # Accelerate's state is one per process
    # A seedable sampler with its own seed: each epoch's order from the seed and
    # set_epoch alone (not torch's global seed), so a run resumed from saved
    # state sees the batches the uninterrupted one saw.
    return Accelerator(cpu=device == "cpu", mixed_precision="bf16", gradient_accumulation_steps=ACCUMULATE,
                       dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, data_seed=1), **kwargs)


def train(acc, model, optimizer, data, epochs, count):
    """Trains `epochs`; returns the seconds it took."""
    start = time.perf_counter()
    for epoch in epochs:
        data.set_epoch(epoch)
        for x, y in data:
            with acc.accumulate(model):
                acc.backward(nn.functional.mse_loss(model(x), y))
                optimizer.step()
                optimizer.zero_grad()
                count.steps += acc.sync_gradients
    return time.perf_counter() - start


def make_group(backend):
    """The recipe's one line: byteps first, then the Accelerator; the
    reference is Accelerate's own choice (gloo on CPU, nccl on GPUs).
    Returns whether a second call hands back the same group."""
    if backend == "byteps":
        group = bps.init_process_group()
        return bps.init_process_group() is group
    return None


def plain_way_refused(device):
    """What Accelerate says to the name itself (the issue's first try): None
    where it takes it (GPUs: then it made the group, and the helper finds it)."""
    try:
        Accelerator(cpu=device == "cpu", kwargs_handlers=[InitProcessGroupKwargs(backend="byteps")])
        return None
    except ValueError as error:
        return str(error)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def run(backend, opts):
    scale, device = opts.scale, opts.device
    found = {"initial": runs.parameters(build(scale)[0])}
    if backend == "byteps":
        found["plain_way"] = plain_way_refused(device)
    found["helper_again_same_group"] = make_group(backend)
    state_dir = os.path.join(opts.out, f"{backend}-state")

    acc, count = accelerator(device), StepCount()
    acc.register_for_checkpointing(count)
    model, optimizer, data = acc.prepare(*build(scale), loader(scale))
    # The dtype the last layer computes in: bfloat16 under mixed_precision="bf16"
    # (the prepared model's own output is cast back to float32).
    seen = {}
    acc.unwrap_model(model)[-1].register_forward_hook(lambda module, args, out: seen.update(dtype=str(out.dtype)))
    seconds = train(acc, model, optimizer, data, [0], count)
    acc.save_state(state_dir)
    seconds += train(acc, model, optimizer, data, [1], count)
    found.update(straight=runs.parameters(acc.unwrap_model(model)), straight_steps=count.steps,
                 straight_seconds=seconds, straight_samples=2 * 32 * scale, forward_dtype=seen.get("dtype"),
                 gradient_numel=runs.gradient_numel(model),
                 wrapped=type(model).__name__, accelerate_backend=acc.state.backend,
                 distributed_type=str(acc.distributed_type), group=runs.group_facts(device),
                 ops_after_straight=runs.engine_ops(),
                 gathered=acc.gather(torch.tensor([float(acc.process_index)], device=acc.device)).tolist())

    acc, count = accelerator(device), StepCount()
    acc.register_for_checkpointing(count)
    model, optimizer, data = acc.prepare(*build(scale, seed=123), loader(scale))  # all must come from the state
    acc.load_state(state_dir)
    train(acc, model, optimizer, data, [1], count)
    found.update(resumed=runs.parameters(acc.unwrap_model(model)), resumed_steps=count.steps,
                 ops_after_resumed=runs.engine_ops())

    acc, count = accelerator(device, fsdp_plugin=FullyShardedDataParallelPlugin()), StepCount()
    # FSDP flattens the parameters when it wraps the model, so the optimizer
    # is made from the prepared model (one made before would step tensors FSDP
    # no longer uses, as Accelerate's FSDP guide says).
    model = acc.prepare(build(scale)[0])
    optimizer, data = acc.prepare(optimizer_of(model), loader(scale))
    train(acc, model, optimizer, data, [0], count)
    os.environ.pop("ACCELERATE_USE_FSDP", None)  # the plugin sets it for the whole process
    found.update(fsdp_wrapped=type(model).__name__, fsdp_distributed_type=str(acc.distributed_type),
                 fsdp=runs.parameters(model), fsdp_steps=count.steps,
                 fsdp_group=runs.group_facts(device))

    if backend != "byteps":  # the helper, called too late, must name what made the group
        try:
            bps.init_process_group()
            found["late_helper"] = None
        except RuntimeError as error:
            found["late_helper"] = str(error)
    return found


def main():
    runs.run_all(run, after_each=lambda: AcceleratorState._reset_state(reset_partial_state=True))


if __name__ == "__main__":
    main()
