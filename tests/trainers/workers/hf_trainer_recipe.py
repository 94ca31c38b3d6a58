"""The Hugging Face Trainer on a named backend: the recipe of
docs/trainers.md, run on the reference backend and then on byteps in one
launch (runs.py).

A small GPT-2 built from its config (nothing downloaded; one tiny layer at
--scale 1), on token sequences this file makes. Per backend: bf16 mixed
precision, gradient accumulation over 2 batches, 2 epochs, saving a
checkpoint after the first; then a new Trainer resumes from that checkpoint
into a freshly initialised model. On byteps the group is made first by
byteps_native.torch.init_process_group, because
TrainingArguments(ddp_backend="byteps") reaches Accelerate's refusal on CPU;
what it says is reported too."""
import os
import time

import torch
from accelerate.state import AcceleratorState
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import byteps_native.torch as bps
from tests.trainers.workers import runs

VOCAB, LENGTH, SAMPLES, BATCH = 64, 8, 32, 4


class Tokens(torch.utils.data.Dataset):
    """Fixed random token sequences; the model learns to predict them."""

    def __init__(self, scale):
        self.ids = torch.randint(0, VOCAB * scale, (SAMPLES * scale, LENGTH * scale),
                                 generator=torch.Generator().manual_seed(1))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def model(scale, seed=0):
    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB * scale, n_positions=LENGTH * scale, n_embd=16 * scale,
                                      n_layer=1 if scale == 1 else 4, n_head=2))


def steps_per_epoch(scale):
    """Optimizer steps of one epoch: 2 ranks, accumulation over 2 batches."""
    return SAMPLES * scale // (2 * BATCH * 2)


def arguments(out, opts, **extra):
    return TrainingArguments(
        output_dir=out, use_cpu=opts.device == "cpu", per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=2, bf16=True, max_steps=2 * steps_per_epoch(opts.scale), learning_rate=1e-2,
        lr_scheduler_type="constant", optim="adamw_torch", seed=0, data_seed=1, save_strategy="steps",
        save_steps=steps_per_epoch(opts.scale), logging_strategy="no", report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, **extra)


def plain_way_refused(out, opts):
    """What TrainingArguments(ddp_backend="byteps") does: refused on CPU; on
    GPUs None (then Accelerate made the group, and the helper finds it)."""
    try:
        arguments(out, opts, ddp_backend="byteps").device
        return None
    except ValueError as error:
        return str(error)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def run(backend, opts):
    out, scale = os.path.join(opts.out, backend), opts.scale
    found = {"initial": runs.parameters(model(scale))}
    if backend == "byteps":
        found["plain_way"] = plain_way_refused(os.path.join(out, "refused"), opts)
        bps.init_process_group()  # the recipe's one line; the reference is Accelerate's own choice

    straight_model = model(scale)
    seen = {}  # the dtype the last layer computes in: bfloat16 under bf16=True
    straight_model.lm_head.register_forward_hook(lambda module, args, out: seen.update(dtype=str(out.dtype)))
    straight = Trainer(model=straight_model, args=arguments(os.path.join(out, "straight"), opts),
                       train_dataset=Tokens(scale))
    start = time.perf_counter()
    straight.train()
    found.update(straight=runs.parameters(straight_model), straight_steps=straight.state.global_step,
                 straight_seconds=time.perf_counter() - start, straight_samples=2 * SAMPLES * scale,
                 forward_dtype=seen.get("dtype"), gradient_numel=runs.gradient_numel(straight_model),
                 wrapped=type(straight.model_wrapped).__name__, group=runs.group_facts(opts.device),
                 ops_after_straight=runs.engine_ops())
    found["eval_loss"] = straight.evaluate(Tokens(scale))["eval_loss"]  # gathered from both ranks

    resumed_model = model(scale, seed=123)  # fresh weights: everything must come from the checkpoint
    resumed = Trainer(model=resumed_model, args=arguments(os.path.join(out, "resumed"), opts),
                      train_dataset=Tokens(scale))
    checkpoint = os.path.join(out, "straight", f"checkpoint-{steps_per_epoch(scale)}")
    resumed.train(resume_from_checkpoint=checkpoint)
    found.update(resumed=runs.parameters(resumed_model), resumed_steps=resumed.state.global_step,
                 ops_after_resumed=runs.engine_ops())
    return found


def main():
    runs.run_all(run, after_each=lambda: AcceleratorState._reset_state(reset_partial_state=True))


if __name__ == "__main__":
    main()
