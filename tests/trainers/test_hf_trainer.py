"""The Hugging Face Trainer (a GPT-2 built from its config, data made here),
2 CPU processes under torchrun, its group made first by
byteps_native.torch.init_process_group (TrainingArguments(ddp_backend=...)
reaches Accelerate's refusal on CPU): bf16, gradient accumulation,
checkpoints and resume_from_checkpoint, each parameter equal to the same run
on gloo."""
import pytest

from tests.trainers import recipes

RUNS = ("straight", "resumed")
REFUSAL = "Your assigned backend byteps is not available, please use gloo"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return recipes.launch("hf_trainer_recipe.py", tmp_path_factory.mktemp("hf_trainer"))


def test_parameters_match_gloo_bitwise(results):
    recipes.check_matches_reference(results, RUNS)


def test_bf16_and_gradient_accumulation_in_effect(results):
    recipes.check_mixed_precision(results)
    recipes.check_accumulation(results, steps=4)  # 2 epochs of 4 batches a rank, 2 batches a step


def test_parameters_moved_and_ranks_agree(results):
    recipes.check_moved(results, RUNS)
    recipes.check_ranks_agree(results, RUNS)


def test_group_is_byteps_and_engine_counted(results):
    recipes.check_byteps_served(results)
    for rank, found in results.items():
        assert found["byteps"]["wrapped"] == "DistributedDataParallel", found["byteps"]["wrapped"]


def test_evaluate_matches_gloo(results):
    for rank, found in results.items():
        assert found["byteps"]["eval_loss"] == found["gloo"]["eval_loss"], \
            f"rank {rank}: evaluate()'s loss on byteps {found['byteps']['eval_loss']!r}, " \
            f"on gloo {found['gloo']['eval_loss']!r}"


def test_resume_from_checkpoint_ends_where_straight_run_does(results):
    recipes.check_resume(results)


def test_plain_ddp_backend_still_refused(results):
    for rank, found in results.items():
        assert found["byteps"]["plain_way"] == REFUSAL, \
            f"rank {rank}: TrainingArguments(use_cpu=True, ddp_backend='byteps') now says " \
            f"{found['byteps']['plain_way']!r}; if it works, docs/trainers.md's recipe can change"
