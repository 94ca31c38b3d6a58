"""Every reducing collective (all_reduce, its coalesced forms, reduce,
reduce_scatter, reduce_scatter_tensor and its coalesced form) x 10 dtypes x
9 reduce ops, on 'byteps' against gloo in the same 2-rank job: wherever gloo
gives a result, byteps gives the same one (int16, which gloo lacks, against
gloo's int32 result narrowed). The engine reduces tensors of any size (SUM
and AVG of its dtypes), so short tensors cover both the engine and the
delegate paths."""
import os

from tests.support.jobs import torchrun
from tests.torch import WORKERS


def test_byteps_matches_gloo(tmp_path):
    results = torchrun(os.path.join(WORKERS, "reduce_matrix.py"), nproc=2, args=[6],
                       result_dir=tmp_path).check().results
    assert sorted(results) == [0, 1], results
    for rank, cases in results.items():
        assert len(cases) == 7 * 10 * 9
        gaps = {case: row for case, row in cases.items() if row["gloo"][0] == "ok" and not row["same"]}
        assert not gaps, f"rank {rank}: byteps differs from gloo in {len(gaps)} cases: " + \
            "; ".join(f"{c}: gloo {r['gloo']} byteps {r['byteps']}" for c, r in list(gaps.items())[:8])
        # Where gloo refuses, byteps gives a result or an error that says why.
        for case, row in cases.items():
            if row["byteps"][0] == "error":
                assert row["byteps"][1].strip(), case
