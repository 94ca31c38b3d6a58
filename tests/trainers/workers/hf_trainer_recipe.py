"""The Hugging Face Trainer on a named backend: the recipe of
docs/trainers.md, run on gloo and then on byteps in one launch (runs.py).

A GPT-2 of one tiny layer built from its config (nothing downloaded), on
token sequences this file makes. Per backend: bf16 mixed precision, gradient
accumulation over 2 batches, 4 optimizer steps in 2 epochs, saving a
checkpoint every 2 steps; then a new Trainer resumes from the step-2
checkpoint into a freshly initialised model. On byteps the group is made
first by byteps_native.torch.init_process_group, because
TrainingArguments(ddp_backend="byteps") reaches Accelerate's refusal on CPU;
that refusal is reported too."""
import os

import torch
from accelerate.state import AcceleratorState
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import byteps_native.torch as bps
from tests.support.results import report
from tests.trainers.workers import runs

VOCAB, LENGTH, SAMPLES = 64, 8, 32


class Tokens(torch.utils.data.Dataset):
    """Fixed random token sequences; the model learns to predict them."""

    def __init__(self):
        self.ids = torch.randint(0, VOCAB, (SAMPLES, LENGTH), generator=torch.Generator().manual_seed(1))

    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def model(seed=0):
    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=LENGTH, n_embd=16, n_layer=1, n_head=2))


def arguments(out, **extra):
    return TrainingArguments(
        output_dir=out, use_cpu=True, per_device_train_batch_size=4, gradient_accumulation_steps=2, bf16=True,
        max_steps=4, learning_rate=1e-2, lr_scheduler_type="constant", optim="adamw_torch", seed=0, data_seed=1,
        save_strategy="steps", save_steps=2, logging_strategy="no", report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, **extra)


def plain_way_refused(out):
    """What TrainingArguments(ddp_backend="byteps") does on CPU."""
    try:
        arguments(out, ddp_backend="byteps")
        return None
    except ValueError as error:
        return str(error)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def run(backend, out):
    out = os.path.join(out, backend)
    found = {"initial": runs.parameters(model())}
    if backend == "byteps":
        found["plain_way"] = plain_way_refused(os.path.join(out, "refused"))
        bps.init_process_group()  # the recipe's one line; gloo is Accelerate's own choice on CPU

    straight_model = model()
    straight = Trainer(model=straight_model, args=arguments(os.path.join(out, "straight")), train_dataset=Tokens())
    straight.train()
    found.update(straight=runs.parameters(straight_model), straight_steps=straight.state.global_step,
                 wrapped=type(straight.model_wrapped).__name__, group=runs.group_facts(),
                 ops_after_straight=runs.engine_ops())

    resumed_model = model(seed=123)  # fresh weights: everything must come from the checkpoint
    resumed = Trainer(model=resumed_model, args=arguments(os.path.join(out, "resumed")), train_dataset=Tokens())
    resumed.train(resume_from_checkpoint=os.path.join(out, "straight", "checkpoint-2"))
    found.update(resumed=runs.parameters(resumed_model), resumed_steps=resumed.state.global_step,
                 ops_after_resumed=runs.engine_ops())
    return found


def main():
    plan, out = runs.parse_runs()
    found = {}
    for backend, port in plan:
        runs.fresh_rendezvous(port)
        found[backend] = run(backend, out)
        AcceleratorState._reset_state(reset_partial_state=True)
        runs.end_run()
    report(found)


if __name__ == "__main__":
    main()
