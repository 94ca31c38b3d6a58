"""PyTorch's own distributed tests on gloo (the reference) and on 'byteps',
in one run; reports each case's outcome on both and the cases gloo passes
but byteps does not.

    python3 -m tests.torch.upstream.run_conformance --families   # all, ~3 min here
    python3 -m tests.torch.upstream.run_conformance --subset ci
    python3 -m tests.torch.upstream.run_conformance --world-size 4 -k test_distributed_suite
    python3 -m tests.torch.upstream.run_conformance --deadline 600 --logs /tmp/conf

Suites: the DistributedTest suite shipped in the torch wheel (through
test_distributed_suite.py) and the upstream files stored under
third_party/pytorch/test/ (third_party/pytorch/README.md names their source). Ranks start by fork (fork_start.py); each
case's outcome is logged as it ends (case_log.py), so a run cut off by
--deadline still reports. CI runs the `ci` subset
(tests/torch/test_upstream_conformance.py). Needs the `expecttest` package
(torch's test utilities import it). docs/torch.md has the measured results.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from tests.support.paths import REPO

HERE = os.path.dirname(os.path.abspath(__file__))
# Cases are named as pytest names them from the repository root, where the runs
# start: tests/torch/upstream/<ours>.py::... and third_party/pytorch/test/<theirs>.py::...
SHIPPED = os.path.relpath(os.path.join(HERE, "test_distributed_suite.py"), REPO)
PYTORCH = "third_party/pytorch/test/"
# The gloo subset last: its last cases run a group in the pytest process itself.
SUITES = [SHIPPED] + [PYTORCH + name for name in (
    "test_c10d_object_collectives.py", "test_zero_redundancy_optimizer_cpu.py",
    "test_file_system_checkpoint_cpu_subset.py", "test_c10d_gloo_subset.py")]


# Representative and quick (about 1 s a case with forked ranks): each family
# of the shipped suite (engine and delegate collectives, reduce ops, p2p,
# barrier and monitored barrier, sparse, DDP with hooks, objects, groups),
# the object collectives over subgroups and distributed checkpointing.
_SHIPPED = SHIPPED + "::TestDistBackendWithSpawn::"
_OBJECTS = PYTORCH + "test_c10d_object_collectives.py::TestObjectCollectivesCPU::"
_ZERO = PYTORCH + "test_zero_redundancy_optimizer_cpu.py::TestZeroRedundancyOptimizerDistributed::"
_GLOO = PYTORCH + "test_c10d_gloo_subset.py::DistributedDataParallelTest::"
_CHECKPOINT = PYTORCH + "test_file_system_checkpoint_cpu_subset.py::"
CI_CASES = [_SHIPPED + name for name in (
    "test_all_reduce_max", "test_all_reduce_sum_async", "test_all_reduce_coalesced_sum",
    "test_reduce_product", "test_reduce_sum_twice", "test_broadcast", "test_all_gather",
    "test_all_gather_coalesced_simple", "test_gather", "test_scatter", "test_send_recv",
    "test_send_recv_any_source", "test_batch_isend_irecv_gloo", "test_barrier_full_group",
    "test_monitored_barrier_gloo", "test_sparse_all_reduce_sum", "test_DistributedDataParallelCPU",
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook", "test_static_graph_api_cpu",
    "test_scatter_object_list", "test_all_gather_object_subgroup", "test_destroy_group", "test_get_future",
)] + [_OBJECTS + name for name in ("test_subpg_scatter_object_cpu", "test_subpg_gather_object_cpu")] + [
    _ZERO + "test_zero_join_cpu", _GLOO + "test_ddp_comm_hook_sparse_gradients"] + [
    # torch.distributed.checkpoint: save, then load into another sharding.
    _CHECKPOINT + "TestDistributedStateDictSaveLoadWithSharedTensor::test_read_write_shard_tensor_thread_count_2",
    _CHECKPOINT + "TestDistributedReshardOnLoad::test_switch_between_sharded_tensor_to_tensor_thread_count_1"]


# Cases whose assertion is about the backend's name, not its behaviour: they
# fail on any backend not called 'gloo'. Reported apart, with the reason.
NAME_BOUND = {
    "test_get_backend": "asserts dist.get_backend() == 'gloo' (the suite's BACKEND, fixed at import)",
    "test_ddp_logging_data_cpu": "asserts DDP's logged backend_name == dist.get_backend(); torch 2.13's "
                                 "ProcessGroup::getBackendName() says 'custom' for every plugin backend",
}


# Families of cases, for the per-family table (first match wins).
FAMILIES = [
    ("distributed checkpoint (ShardedTensor save/load)", r"StateDictSaveLoad|ReshardOnLoad"),
    ("ZeroRedundancyOptimizer", r"ZeroRedundancy"),
    ("object collectives", r"_object"),
    ("all_reduce*", r"test_all_reduce|test_allreduce"),
    ("sparse all_reduce", r"test_sparse"),
    ("reduce_scatter*", r"test_reduce_scatter"),
    ("reduce*", r"test_reduce"),
    ("broadcast*", r"test_broadcast"),
    ("all_gather*", r"test_all_gather|test_allgather"),
    ("gather*", r"test_gather"),
    ("scatter*", r"test_scatter"),
    ("all_to_all*", r"test_all_to_all|test_alltoall"),
    ("barrier* / monitored_barrier*", r"barrier"),
    ("send/recv, isend/irecv, batch_isend_irecv", r"test_send|test_recv|test_isend|test_irecv|test_batch_isend"),
    ("DDP (DistributedDataParallel*, ddp_*, comm hooks, Reducer)",
     r"DistributedDataParallel|test_ddp|_ddp_|test_accumulate_gradients|test_static_graph|test_ignored_output|"
     r"Reducer|test_grads_same|test_verify_model|comm_hook|test_sync_bn|test_SyncBatchNorm|test_post_localSGD|"
     r"test_invalid_static_graph|test_output_unused|test_undefined_grad|test_detect_ddp|test_stateless_api|"
     r"test_different_graph|test_dump_DDP|test_allgather_coalesced_async|Dispatched"),
    ("groups (new_group, subgroups, destroy, rank/size, backend)",
     r"group|test_get_|test_Backend|test_destroy|test_backend"),
]


def family(case):
    import re

    name = case.split("::", 1)[-1]
    for label, pattern in FAMILIES:
        if re.search(pattern, name):
            return label
    return "other"


def family_table(table):
    """Markdown rows: family | cases | gloo pass | byteps pass | gloo passes, byteps not."""
    rows = {}
    for case, row in table.items():
        r = rows.setdefault(family(case), {"cases": 0, "gloo": 0, "byteps": 0, "behind": []})
        r["cases"] += 1
        r["gloo"] += row["gloo"] == "pass"
        r["byteps"] += row["byteps"] == "pass"
        if row["gloo"] == "pass" and row["byteps"] != "pass":
            r["behind"].append(case.split("::")[-1])
    order = [label for label, _ in FAMILIES] + ["other"]
    lines = ["| family | cases | gloo pass | byteps pass | gloo passes, byteps not |", "|---|---:|---:|---:|---|"]
    for label in order:
        if label in rows:
            r = rows[label]
            lines.append(f"| {label} | {r['cases']} | {r['gloo']} | {r['byteps']} | "
                         f"{', '.join(r['behind']) or 'none'} |")
    return "\n".join(lines)


def collect(targets):
    """The case ids of `targets`, as pytest names them from the repository root."""
    env = dict(os.environ, CONFORMANCE_BACKEND="gloo")
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                          *targets], cwd=REPO, env=env, capture_output=True, text=True)
    ids = [line.strip() for line in out.stdout.splitlines() if "::" in line]
    if not ids:
        raise SystemExit("collected no cases:\n" + out.stdout[-3000:] + out.stderr[-3000:])
    return ids


def start(backend, targets, case_log, output, start_method, world_size):
    env = dict(os.environ)
    env["WORLD_SIZE"] = str(world_size)
    env["CONFORMANCE_BACKEND"] = backend
    env["CONFORMANCE_CASE_LOG"] = case_log
    env["CONFORMANCE_START"] = start_method
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "swap_site"), HERE, REPO, env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("BYTEPS_TIMEOUT", "60")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "case_log", *targets]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop_at(deadline, procs):
    """Past `deadline`, end what still runs. Each case's outcome is already in
    its shard's case log; torch's shipped suite ignores SIGINT, so after a
    short grace the whole process group (pytest and its ranks) is killed.
    Returns whether anything was cut off."""
    import signal
    import time

    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(1)
    running = [p for p in procs if p.poll() is None]
    for p in running:
        os.killpg(p.pid, signal.SIGINT)
    grace = time.monotonic() + 10
    while time.monotonic() < grace and any(p.poll() is None for p in running):
        time.sleep(1)
    for p in running:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    return bool(running)


def parse(case_log):
    """{case: outcome} from a case log (case_log.py); a case that started
    but never ended (the run was cut off in it) is 'cut'."""
    outcomes = {}
    if not os.path.exists(case_log):
        return outcomes
    with open(case_log) as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line torn by the kill
            if record["outcome"] == "started":
                outcomes.setdefault(record["case"], "cut")
            else:
                outcomes[record["case"]] = record["outcome"]
    return outcomes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subset", choices=["full", "ci"], default="full")
    parser.add_argument("-k", default=None, help="pytest -k expression to narrow the full run")
    parser.add_argument("--json", default=None, help="write {case: {gloo:, byteps:}} here")
    parser.add_argument("--jobs", type=int, default=1,
                        help="split the cases into this many shards, each run on both backends at once")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds: end the run then and report the cases that ended (the one "
                             "running: cut; one only the other backend reached: missing)")
    parser.add_argument("--start", choices=["fork", "spawn"], default="fork",
                        help="how the shipped suite starts its ranks: fork (each rank inherits the "
                             "imported suite; ~20x faster here) or spawn (torch's own CI way)")
    parser.add_argument("--world-size", type=int, default=2,
                        help="ranks per case of the shipped suite (some cases need 4 or 8)")
    parser.add_argument("--families", action="store_true", help="print a per-family table (markdown)")
    parser.add_argument("--logs", default=None,
                        help="keep each run's pytest output and case log in this folder")
    args = parser.parse_args(argv)
    targets = CI_CASES if args.subset == "ci" else SUITES + (["-k", args.k] if args.k else [])
    # Round-robin shards keep each shard's mix of slow and quick cases alike.
    shards = [targets] if args.jobs <= 1 else [ids for ids in
                                               (collect(targets)[j::args.jobs] for j in range(args.jobs)) if ids]
    results = {"gloo": {}, "byteps": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.logs or tmp
        os.makedirs(folder, exist_ok=True)
        # Both backends at once (ports and stores are per case): half the wall time.
        runs = []
        for j, shard in enumerate(shards):
            for backend in results:
                case_log = os.path.join(folder, f"{backend}.{j}.cases.jsonl")
                if os.path.exists(case_log):
                    os.remove(case_log)
                output = open(os.path.join(folder, f"{backend}.{j}.out"), "w")
                runs.append((backend, case_log, output, start(backend, shard, case_log, output, args.start,
                                                            args.world_size)))
        procs = [proc for *_, proc in runs]
        if args.deadline:
            import time

            if stop_at(time.monotonic() + args.deadline, procs):
                print(f"cut off at the {args.deadline:.0f} s deadline: cases neither backend reached are not listed")
        for backend, case_log, output, proc in runs:
            proc.wait()
            output.close()
            results[backend].update(parse(case_log))
    cases = sorted(set(results["gloo"]) | set(results["byteps"]))
    table = {c: {b: results[b].get(c, "missing") for b in ("gloo", "byteps")} for c in cases}
    for case, row in table.items():
        print(f"{row['gloo']:>7} {row['byteps']:>7}  {case}")
    behind = [c for c, row in table.items() if row["gloo"] == "pass" and row["byteps"] != "pass"]
    name_bound = {c: NAME_BOUND[c.split("::")[-1]] for c in behind if c.split("::")[-1] in NAME_BOUND}
    gaps = [c for c in behind if c not in name_bound]
    summary = {"cases": len(cases),
               "gloo_pass": sum(r["gloo"] == "pass" for r in table.values()),
               "byteps_pass": sum(r["byteps"] == "pass" for r in table.values()),
               "gloo_pass_byteps_not": gaps,
               "gloo_pass_byteps_not_name_bound": name_bound}
    print(json.dumps(summary, indent=1))
    if args.families:
        print(family_table(table))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "cases": table}, f, indent=1)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
