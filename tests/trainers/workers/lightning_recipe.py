"""PyTorch Lightning's DDPStrategy on a named backend: the recipe of
docs/trainers.md, run on the reference backend and then on byteps in one
launch (runs.py).

Per backend: bf16 mixed precision, gradient accumulation over 2 batches,
2 epochs, once straight through and once stopped after epoch 1,
checkpointed and resumed from the file by a new Trainer into a model of
fresh weights. On GPUs also FSDPStrategy for one epoch (Lightning refuses
FSDP on CPU). Reports each run's parameters, its group, the engine's
counters and the straight run's seconds."""
import os
import time

import pytorch_lightning as pl
import torch
from pytorch_lightning.strategies import DDPStrategy, FSDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import byteps_native.torch  # noqa: F401  registers 'byteps' (installed, torch's autoload does too)
from tests.trainers.workers import runs

ACCUMULATE = 2
BATCH = 4


class Regressor(pl.LightningModule):
    def __init__(self, scale, device, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(16, 32 * scale), nn.Tanh(), nn.Linear(32 * scale, 4))
        self.device_type = device
        self.facts = None
        self.forward_dtype = None

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        self.forward_dtype = str(out.dtype)  # bfloat16 under "bf16-mixed"
        return nn.functional.mse_loss(out.float(), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)

    def on_train_end(self):
        self.facts = runs.group_facts(self.device_type)


def loader(scale):
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(32 * scale, 16, generator=g), torch.randn(32 * scale, 4, generator=g))
    return DataLoader(data, batch_size=BATCH, shuffle=True)  # Lightning puts a DistributedSampler in


def trainer(strategy, epochs, root, device):
    return pl.Trainer(accelerator="gpu" if device == "cuda" else "cpu", devices=2 // runs.MACHINES,
                      num_nodes=runs.MACHINES, strategy=strategy,
                      precision="bf16-mixed", accumulate_grad_batches=ACCUMULATE, max_epochs=epochs,
                      default_root_dir=root, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)


def run(backend, opts):
    scale, device, out = opts.scale, opts.device, opts.out
    ddp = lambda: DDPStrategy(process_group_backend=backend)  # noqa: E731
    found = {"initial": runs.parameters(Regressor(scale, device))}
    model = Regressor(scale, device)
    straight = trainer(ddp(), 2, out, device)
    start = time.perf_counter()
    straight.fit(model, loader(scale))
    found.update(straight=runs.parameters(model), straight_steps=straight.global_step, group=model.facts,
                 forward_dtype=model.forward_dtype, gradient_numel=runs.gradient_numel(model),
                 straight_seconds=time.perf_counter() - start, straight_samples=2 * 32 * scale,
                 ops_after_straight=runs.engine_ops())

    first = Regressor(scale, device)
    stopped = trainer(ddp(), 1, out, device)
    stopped.fit(first, loader(scale))
    checkpoint = os.path.join(out, f"{backend}-epoch1.ckpt")
    stopped.save_checkpoint(checkpoint)
    resumed_model = Regressor(scale, device, seed=123)  # fresh weights: everything must come from the file
    resumed = trainer(ddp(), 2, out, device)
    resumed.fit(resumed_model, loader(scale), ckpt_path=checkpoint)
    found.update(resumed=runs.parameters(resumed_model), resumed_steps=resumed.global_step,
                 ops_after_resumed=runs.engine_ops())

    if device == "cuda":  # FSDPStrategy: GPUs only (docs/trainers.md)
        sharded = Regressor(scale, device)
        fsdp = trainer(FSDPStrategy(process_group_backend=backend), 1, out, device)
        fsdp.fit(sharded, loader(scale))
        found.update(fsdp=runs.parameters(fsdp.strategy.model), fsdp_steps=fsdp.global_step,
                     fsdp_wrapped=type(fsdp.strategy.model).__name__, fsdp_group=sharded.facts)
    return found


def main():
    runs.run_all(run)


if __name__ == "__main__":
    main()
