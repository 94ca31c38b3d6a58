"""Stand-in for the helpers the upstream tests import from Horovod's
test/utils/common.py (and horovod.common.util), written for torchrun: the
launcher's RANK / WORLD_SIZE play the part of MPI's environment."""
import contextlib
import os
import shutil
import tempfile

from packaging import version


def mpi_env_rank_and_size():
    """The rank and size the launcher gave this process (torchrun's variables)."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def skip_or_fail_gpu_test(test, message):
    if int(os.environ.get("HOROVOD_TEST_GPU", 0)):
        test.fail(message)
    else:
        test.skipTest(message)


@contextlib.contextmanager
def temppath():
    folder = tempfile.mkdtemp()
    try:
        yield os.path.join(folder, "temp_test_file")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def is_version_greater_equal_than(ver, target):
    return version.parse(ver) >= version.parse(target)
