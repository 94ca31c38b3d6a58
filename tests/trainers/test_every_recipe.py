"""What every trainer recipe must show, each against the same run on gloo
(2 CPU processes under torchrun): bitwise equal parameters that moved and
agree across ranks, bf16 and gradient accumulation in effect, a group that
really is byteps with the engine's counters grown, and a resume that ends
where the straight run does."""
import pytest

from tests.trainers import recipes
from tests.trainers.conftest import RECIPES

TRAINERS = sorted(RECIPES)


@pytest.mark.parametrize("trainer", TRAINERS)
def test_parameters_match_gloo_bitwise(recipe_results, trainer):
    recipes.check_matches_reference(recipe_results(trainer), RECIPES[trainer][1])


@pytest.mark.parametrize("trainer", TRAINERS)
def test_bf16_and_gradient_accumulation_in_effect(recipe_results, trainer):
    results = recipe_results(trainer)
    recipes.check_mixed_precision(results)
    recipes.check_accumulation(results, steps=4)  # 2 epochs of 4 batches a rank, 2 batches a step


@pytest.mark.parametrize("trainer", TRAINERS)
def test_parameters_moved_and_ranks_agree(recipe_results, trainer):
    results, runs = recipe_results(trainer), RECIPES[trainer][1]
    recipes.check_moved(results, runs)
    recipes.check_ranks_agree(results, runs)


@pytest.mark.parametrize("trainer", TRAINERS)
def test_group_is_byteps_and_engine_counted(recipe_results, trainer):
    recipes.check_byteps_served(recipe_results(trainer))


@pytest.mark.parametrize("trainer", TRAINERS)
def test_resume_ends_where_straight_run_does(recipe_results, trainer):
    recipes.check_resume(recipe_results(trainer))
