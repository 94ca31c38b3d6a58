"""Tensors behind one name that change size, and more names than the
shared-memory key table holds, on the shared-memory path (local_size >= 2),
with and without servers (issue 20 items 5 and 12).

Before: a size change that every rank agreed on was refused as a mismatch
with one local rank's size ("about 448 bytes on another local rank"), and
with servers the machines' rounds drifted apart until BYTEPS_TIMEOUT killed
the job; once BYTEPS_LOCAL_KEY_TABLE_SIZE names had been used, every new
name failed."""
import pytest

from tests.reliability import Cluster

JOB_TIMEOUT = 60

TOPOLOGIES = {
    "one_machine": dict(machines=1, local_size=2, servers=0),
    "two_machines": dict(machines=2, local_size=2, servers=1),
}


def _run(tmp_path, topology, script, *args, **env):
    with Cluster(tmp_path, **TOPOLOGIES[topology], BYTEPS_TIMEOUT=5, BYTEPS_PARTITION_BYTES=4096, **env) as c:
        c.start(script, *args)
        codes = c.wait_all(JOB_TIMEOUT)
        assert None not in codes.values(), "job hung:\n" + c.dump()
        return c, codes, {w.name: w.output() for w in c.workers()}


def _lines(out, prefix):
    return [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_size_change_every_rank_agrees_on_gives_exact_sums(tmp_path, topology):
    # 100 -> 300 -> 100 -> 5000 (two partitions) -> 7 -> 300 -> 5000 floats.
    c, codes, outs = _run(tmp_path, topology, "resize.py", "agree")
    for name, out in outs.items():
        steps = _lines(out, "STEP ")
        assert len(steps) == 7, f"{name}:\n{out}"
        for line in steps:
            assert line.endswith(" ok"), f"{name}: step {line}\n{out}"
    assert all(rc == 0 for rc in codes.values()), c.dump()


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_size_disagreement_names_both_ranks_everywhere_and_the_job_goes_on(tmp_path, topology):
    # 'x' with 100 floats everywhere, then 300 on rank 1 only, then agreed sizes again.
    c, codes, outs = _run(tmp_path, topology, "resize.py", "disagree")
    for name, out in outs.items():
        assert _lines(out, "FIRST ") == ["ok"], f"{name}: the op before the disagreement failed:\n{out}"
        result = _lines(out, "RESULT ")
        assert result and result[0].startswith("error 2 "), f"{name}: expected BPS_MISMATCH:\n{out}"
        for words in ("'x'", "float32 [300] (sum) on rank 1", "float32 [100] (sum) on rank 0"):
            assert words in result[0], f"{name}: the error does not say {words!r}: {result[0]}"
        assert _lines(out, "REUSE ") == ["ok"], f"{name}: the name did not work again:\n{out}"
        assert _lines(out, "AFTER ") == ["ok"], f"{name}: the job did not go on:\n{out}"
    assert all(rc == 0 for rc in codes.values()), c.dump()


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_more_names_than_the_key_table_holds(tmp_path, topology):
    # A table of 16 entries; 240 fresh names, 4 at a time beside a 3-partition
    # tensor used every step (8 entries in flight per machine), old names revisited.
    c, codes, outs = _run(tmp_path, topology, "many_names.py", 240, 4, BYTEPS_LOCAL_KEY_TABLE_SIZE=16)
    for name, out in outs.items():
        done = _lines(out, "DONE ")
        assert done, f"{name}:\n{out}"
        pushed, keys_used = done[0].split()
        assert int(pushed) == 240
        assert int(keys_used) <= 16, f"{name}: {keys_used} keys in a table of 16"
    assert all(rc == 0 for rc in codes.values()), c.dump()
