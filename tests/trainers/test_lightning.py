"""PyTorch Lightning, Trainer(strategy=DDPStrategy(process_group_backend="byteps")),
2 CPU processes under torchrun: bf16 mixed precision, gradient accumulation,
checkpoint save and resume, each parameter equal to the same run on gloo."""
import pytest

from tests.trainers import recipes

RUNS = ("straight", "resumed")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return recipes.launch("lightning_recipe.py", tmp_path_factory.mktemp("lightning"))


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


def test_checkpoint_resume_ends_where_straight_run_does(results):
    recipes.check_resume(results)
