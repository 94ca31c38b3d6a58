"""One launch per trainer recipe for the whole session, shared by the checks
every recipe passes (test_every_recipe.py) and each trainer's own
(test_<trainer>.py)."""
import pytest

from tests.trainers import recipes

# trainer -> (worker, the runs whose parameters are compared with the reference)
RECIPES = {
    "lightning": ("lightning_recipe.py", ("straight", "resumed")),
    "accelerate": ("accelerate_recipe.py", ("straight", "resumed", "fsdp")),
    "hf_trainer": ("hf_trainer_recipe.py", ("straight", "resumed")),
}


@pytest.fixture(scope="session")
def recipe_results(tmp_path_factory):
    """recipe_results(trainer) -> {rank: {backend: findings}}, launched once."""
    launched = {}

    def results(trainer):
        if trainer not in launched:
            launched[trainer] = recipes.launch(RECIPES[trainer][0], tmp_path_factory.mktemp(trainer))
        return launched[trainer]
    return results
