"""Hugging Face Accelerate, 2 CPU processes under torchrun, its group made
first by byteps_native.torch.init_process_group (Accelerate refuses the name
on CPU): bf16 mixed precision, gradient accumulation, save_state/load_state,
each parameter equal to the same run on gloo; with an FSDP plugin, on CPU,
Accelerate wraps DDP (asserted, so a fallback cannot pass as FSDP)."""
import pytest

from tests.trainers import recipes


@pytest.fixture
def results(recipe_results):
    return recipe_results("accelerate")


def test_group_is_byteps_and_engine_counted(results):
    recipes.check_byteps_served(results)
    recipes.check_byteps_served(results, group_key="fsdp_group")
    for rank, found in results.items():
        # Accelerate names the backend itself (gloo on CPU), whatever the group runs on.
        assert found["byteps"]["accelerate_backend"] == "gloo", found["byteps"]["accelerate_backend"]


def test_gather_collects_every_rank(results):
    for rank, found in results.items():
        for backend in found:
            assert found[backend]["gathered"] == [0.0, 1.0], f"rank {rank}, {backend}: {found[backend]['gathered']}"


def test_fsdp_plugin_on_cpu_wraps_ddp(results):
    for rank, found in results.items():
        for backend in found:
            run = found[backend]
            assert run["wrapped"] == "DistributedDataParallel", run["wrapped"]
            assert (run["fsdp_wrapped"], run["fsdp_distributed_type"]) == \
                ("DistributedDataParallel", "DistributedType.MULTI_CPU"), \
                f"rank {rank}, {backend}: an FSDP plugin on CPU gave {run['fsdp_wrapped']} " \
                f"({run['fsdp_distributed_type']}); docs/trainers.md says Accelerate wraps DDP there: update it"


def test_plain_name_still_refused_and_helper_behaves(results):
    for rank, found in results.items():
        assert found["byteps"]["plain_way"] == recipes.ACCELERATE_REFUSAL, \
            f"rank {rank}: Accelerator(cpu=True, InitProcessGroupKwargs(backend='byteps')) now says " \
            f"{found['byteps']['plain_way']!r}; if it works, docs/trainers.md's recipe can drop its first line"
        assert found["byteps"]["helper_again_same_group"] is True, \
            f"rank {rank}: a second init_process_group() did not hand back the existing byteps group"
        late = found["gloo"]["late_helper"]
        assert late and "already exists on 'gloo'" in late and "before building the trainer" in late, late
