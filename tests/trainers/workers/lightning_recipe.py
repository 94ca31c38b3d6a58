"""PyTorch Lightning's DDPStrategy on a named backend: the recipe of
docs/trainers.md, run on gloo and then on byteps in one launch (runs.py).

Per backend: bf16 mixed precision, gradient accumulation over 2 batches,
2 epochs of 2 optimizer steps each, once straight through and once stopped
after epoch 1, checkpointed and resumed from the file by a new Trainer.
Reports each run's parameters, its group and the engine's counters."""
import os

import pytorch_lightning as pl
import torch
from pytorch_lightning.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import byteps_native.torch  # noqa: F401  registers 'byteps' (installed, torch's autoload does too)
from tests.support.results import report
from tests.trainers.workers import runs

ACCUMULATE = 2
BATCH = 4


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
        self.facts = None

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)

    def on_train_end(self):
        self.facts = runs.group_facts()


def loader():
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(32, 16, generator=g), torch.randn(32, 4, generator=g))
    return DataLoader(data, batch_size=BATCH, shuffle=True)  # Lightning puts a DistributedSampler in


def trainer(backend, epochs, root):
    return pl.Trainer(accelerator="cpu", devices=2, strategy=DDPStrategy(process_group_backend=backend),
                      precision="bf16-mixed", accumulate_grad_batches=ACCUMULATE, max_epochs=epochs,
                      default_root_dir=root, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)


def run(backend, out):
    found = {"initial": runs.parameters(Regressor())}
    model = Regressor()
    straight = trainer(backend, 2, out)
    straight.fit(model, loader())
    found.update(straight=runs.parameters(model), straight_steps=straight.global_step, group=model.facts,
                 ops_after_straight=runs.engine_ops())

    first = Regressor()
    stopped = trainer(backend, 1, out)
    stopped.fit(first, loader())
    checkpoint = os.path.join(out, f"{backend}-epoch1.ckpt")
    stopped.save_checkpoint(checkpoint)
    resumed_model = Regressor()  # fresh weights: everything must come from the file
    resumed = trainer(backend, 2, out)
    resumed.fit(resumed_model, loader(), ckpt_path=checkpoint)
    found.update(resumed=runs.parameters(resumed_model), resumed_steps=resumed.global_step,
                 ops_after_resumed=runs.engine_ops())
    return found


def main():
    plan, out = runs.parse_runs()
    found = {}
    for backend, port in plan:
        runs.fresh_rendezvous(port)
        found[backend] = run(backend, out)
        runs.end_run()
    report(found)


if __name__ == "__main__":
    main()
