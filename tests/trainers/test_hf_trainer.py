"""The Hugging Face Trainer (a GPT-2 built from its config, data made here),
2 CPU processes under torchrun, its group made first by
byteps_native.torch.init_process_group (TrainingArguments(ddp_backend=...)
reaches Accelerate's refusal on CPU): bf16, gradient accumulation,
checkpoints and resume_from_checkpoint, each parameter equal to the same run
on gloo."""
import pytest

from tests.trainers import recipes


@pytest.fixture
def results(recipe_results):
    return recipe_results("hf_trainer")


def test_group_is_byteps_and_engine_counted(results):
    recipes.check_byteps_served(results)
    for rank, found in results.items():
        assert found["byteps"]["wrapped"] == "DistributedDataParallel", found["byteps"]["wrapped"]


def test_evaluate_matches_gloo(results):
    for rank, found in results.items():
        assert found["byteps"]["eval_loss"] == found["gloo"]["eval_loss"], \
            f"rank {rank}: evaluate()'s loss on byteps {found['byteps']['eval_loss']!r}, " \
            f"on gloo {found['gloo']['eval_loss']!r}"


def test_plain_ddp_backend_still_refused(results):
    for rank, found in results.items():
        assert found["byteps"]["plain_way"] == recipes.ACCELERATE_REFUSAL, \
            f"rank {rank}: TrainingArguments(use_cpu=True, ddp_backend='byteps') now says " \
            f"{found['byteps']['plain_way']!r}; if it works, docs/trainers.md's recipe can change"
