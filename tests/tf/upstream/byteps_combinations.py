"""Strategy combinations for TensorFlow's own distribute tests: BytePSOps and
the reference TensorFlow strategy of one layout (processes x local devices).

The layout comes from BPS_UPSTREAM_LAYOUT (1x2, 2x1 or 2x2; set by
run_upstream.py); ``STRATEGIES`` replaces the strategy lists of the adapted
test files, so each case runs with the reference and with BytePSOps in the
same run:

* 1x2: MirroredStrategy on 2 CPUs (TF's Mirrored2CPUs) vs
  MirroredStrategy(["/cpu:0", "/cpu:1"], BytePSOps()) in a 1-worker job;
* 2x1: MultiWorkerMirroredStrategy chief + worker (TF's
  MultiWorkerMirrored2x1CPU) vs MirroredStrategy(["/cpu:0"], BytePSOps()) in
  each of 2 processes;
* 2x2: MirroredStrategy(["/cpu:0", "/cpu:1"], BytePSOps()) in each of 2
  processes, against the two 4-replica CPU references TensorFlow has:
  MirroredStrategy on 4 CPUs of one process (1x4) and MultiWorkerMirrored
  chief + 3 workers (TF's MultiWorkerMirrored4x1CPU). MWMS cannot itself run
  2 workers x 2 CPUs: CollectiveAllReduceExtended._initialize_local_devices
  gives a worker one CPU device whatever it is told, GPUs being the only
  devices it multiplies.

The processes of the multi-process layouts come from TensorFlow's own
MultiProcessPoolRunner (chief = BytePS worker 0); this module starts the
BytePS scheduler and server in the main process before the pool, and every
process of the pool joins the job from its TF_CONFIG task.
"""
import atexit
import json
import os

from tensorflow.python.distribute import combinations
from tensorflow.python.distribute import mirrored_strategy
from tensorflow.python.distribute import multi_process_runner
from tensorflow.python.distribute import multi_worker_test_base
from tensorflow.python.distribute import strategy_combinations

HERE = os.path.dirname(os.path.abspath(__file__))
from tests.support.jobs import role_argv, role_env
from tests.support.processes import LoggedProcess

LAYOUT = os.environ.get("BPS_UPSTREAM_LAYOUT", "2x1")
PROCESSES, LOCAL_DEVICES = (int(n) for n in LAYOUT.split("x"))
_engine_job = []


def _start_engine_job():
    """Scheduler and server for PROCESSES workers; the DMLC environment goes
    into os.environ so that the pool's processes inherit it."""
    if _engine_job:
        return
    for proc in _engine_processes(PROCESSES, "job"):
        _engine_job.append(proc)
        atexit.register(proc.stop, 5)


def _engine_processes(num_workers, label, rendezvous_timeout=None):
    """Starts a scheduler and a server for `num_workers` workers; the DMLC
    environment goes into os.environ (processes started later inherit it)."""
    env = role_env(DMLC_NUM_WORKER=num_workers, DMLC_NUM_SERVER=1, BYTEPS_LOCAL_RANK=0, BYTEPS_LOCAL_SIZE=1,
                   BYTEPS_TIMEOUT=os.environ.get("BYTEPS_TIMEOUT", "30"),
                   BYTEPS_RENDEZVOUS_TIMEOUT=rendezvous_timeout or 60)
    for key in ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER",
                "DMLC_INTERFACE", "BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE", "BYTEPS_TIMEOUT",
                "BYTEPS_RENDEZVOUS_TIMEOUT", "BYTEPS_JOB_TOKEN", "BYTEPS_JOB_ID", "PYTHONPATH"):
        os.environ[key] = env[key]
    log_dir = os.environ.get("BPS_UPSTREAM_LOG_DIR", "/tmp")
    return [LoggedProcess(role, role_argv(role, "engine"), dict(env, DMLC_ROLE=role),
                          os.path.join(log_dir, f"bps_upstream_{LAYOUT}_{label}_{role}.log"))
            for role in ("scheduler", "server")]


# cross_device_ops_test swaps the cross-device ops, not a strategy: run once
# with TensorFlow's ("reference") and once with BytePSOps ("bytepsops").
CROSS_DEVICE_OPS = os.environ.get("BPS_UPSTREAM_CROSS_DEVICE_OPS", "reference")


def _pickle_main_classes_by_reference():
    """cross_device_ops_test hands its pools closures that capture the test
    case (`self`). dill pickles a class of __main__ by value, with every
    method; the methods that TensorFlow's combinations decorate are wrappers
    whose __module__ tf_decorator relabels to "__main__" while their globals
    stay tensorflow/python/distribute/combinations.py's, so dill (>= 0.3.6)
    copies that module's globals into the pickle, NamedObjects
    (`tf_function`) included; unpickling a NamedObject recurses in its
    __getattr__ (pickle looks up __setstate__ before _obj exists), and every
    pool worker died with RecursionError, TensorFlow's own ops included.
    The pool processes re-run the same test program as __main__, so the
    class is found there by name.

    A test case of MultiWorkerTestBase keeps its cached sessions in a
    threading.local, which pickle refuses: it travels as a new, empty one
    (the process at the other end opens its own sessions)."""
    import copyreg
    import threading

    import dill  # multi_process_runner's dependency
    dill.settings["byref"] = True
    copyreg.pickle(threading.local, lambda local: (threading.local, ()))


if "BPS_UPSTREAM_CROSS_DEVICE_OPS" in os.environ:
    _pickle_main_classes_by_reference()


# cross_device_ops_test on a layout of several local devices (1x2, 2x2): its
# GPU cases run on that many logical CPUs per process (make_collective), so
# the per-replica all-reduce of several local replicas is compared with
# TensorFlow's CollectiveAllReduce -- MirroredStrategy's own cross-device ops
# -- on machines without GPUs. Only the cases of the layout's process count
# and device count run; NCCL needs real GPUs.
CPUS_AS_GPUS = LOCAL_DEVICES if ("BPS_UPSTREAM_CROSS_DEVICE_OPS" in os.environ and LOCAL_DEVICES > 1) else 0


def _layout_gpu_combination():
    from tensorflow.python.distribute import collective_util

    def should_execute_combination(self, kwargs):  # pylint: disable=unused-argument
        required = kwargs.get("required_gpus", 0) or 0
        processes = kwargs.get("num_processes", PROCESSES)
        if required != CPUS_AS_GPUS or processes != PROCESSES:
            return False, (f"layout {LAYOUT}: runs the cases of {PROCESSES} process(es) x {CPUS_AS_GPUS} "
                           f"devices (logical CPUs for required_gpus={CPUS_AS_GPUS})")
        if kwargs.get("implementation") == collective_util.CommunicationImplementation.NCCL:
            return False, f"layout {LAYOUT}: NCCL needs GPUs; these devices are logical CPUs"
        return True, None

    combinations.GPUCombination.should_execute_combination = should_execute_combination


if CPUS_AS_GPUS:
    _layout_gpu_combination()


def start_engine_job():
    """The scheduler and server of the layout's job (main process, before
    any pool process starts; pool processes, which import the test module
    too, carry a TF_CONFIG and start nothing)."""
    if "TF_CONFIG" not in os.environ:
        _start_engine_job()


def bytepsops_for_pool_worker(num_processes, task_id, devices=None):
    """BytePSOps for worker `task_id` of a pool of `num_processes` (one
    engine per process, joined on first use; a 1-process pool runs the
    engine on its own), on the local `devices` the test gives
    CollectiveAllReduce."""
    os.environ.update(DMLC_ROLE="worker", DMLC_WORKER_ID=str(task_id), DMLC_NUM_WORKER=str(num_processes))
    import byteps_native.tf as bps  # late: the engine starts from the environment set above
    return bps.BytePSOps(devices=devices)


def _task_devices(num_gpus):
    return [f"/gpu:{i}" for i in range(num_gpus)] if num_gpus else ["/cpu:0"]


def bytepsops_strategy_for_task(num_gpus, cluster_resolver):
    """collective_all_reduce_strategy_test: MirroredStrategy(BytePSOps) over
    the task's devices, given the cluster resolver MWMS would get (its size
    and this task's rank; the engine starts at the first collective, in a
    process of run_between_graph_processes; with an empty cluster spec, a job
    of this process alone)."""
    import byteps_native.tf as bps  # late: the engine starts from the environment
    return mirrored_strategy.MirroredStrategy(_task_devices(num_gpus),
                                              cross_device_ops=bps.BytePSOps(cluster_resolver=cluster_resolver))


_between_graph_runs = [0]


def run_between_graph_processes(test_case, client_fn, cluster_spec, num_gpus, args, kwargs):
    """MultiWorkerTestBase._run_between_graph_clients with one process per
    task (TensorFlow runs each task in a thread of the test process; one
    BytePS engine per process is one rank): client_fn(task_type, task_id,
    num_gpus, *args, **kwargs) in each, in a fresh BytePS job (chief =
    worker 0). Raises the first task's failure. The test class travels by
    reference: what its setUpClass set in this process (the cluster spec)
    is set again there."""
    has_chief = bool(cluster_spec.get("chief"))
    num_workers = len(cluster_spec.get("worker", []))
    _between_graph_runs[0] += 1
    saved_environ = dict(os.environ)
    # the first multi_process_runner.run of a program starts its helper
    # processes first (a minute on a loaded 2-core host)
    procs = _engine_processes(num_workers + int(has_chief), f"run{_between_graph_runs[0]}", rendezvous_timeout=300)
    # multi_process_runner's processes may come from a process started
    # before this job (they need not inherit os.environ as it is now)
    job_environ = {k: v for k, v in os.environ.items() if k.startswith(("DMLC_", "BYTEPS_"))}

    def task_fn():
        task = json.loads(os.environ["TF_CONFIG"])["task"]
        worker_id = 0 if task["type"] == "chief" else task["index"] + int(has_chief)
        os.environ.update(job_environ, DMLC_ROLE="worker", DMLC_WORKER_ID=str(worker_id))
        type(test_case)._cluster_spec = cluster_spec  # pylint: disable=protected-access
        client_fn(task["type"], task["index"], num_gpus, *args, **kwargs)

    try:
        multi_process_runner.run(task_fn, multi_worker_test_base.create_cluster_spec(
            has_chief=has_chief, num_workers=num_workers), timeout=300)
    finally:
        for proc in procs:
            proc.stop(5)
        os.environ.clear()  # this process stays out of the job
        os.environ.update(saved_environ)


def _join_engine_job():
    """In a pool process: this process is BytePS worker <chief 0, worker i+1>."""
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    worker_id = 0 if task.get("type", "chief") == "chief" else task["index"] + 1
    os.environ["DMLC_ROLE"] = "worker"
    os.environ["DMLC_WORKER_ID"] = str(worker_id)


def _devices():
    return [f"/cpu:{i}" for i in range(LOCAL_DEVICES)]


def _create_bytepsops_strategy():
    if PROCESSES == 1:
        _start_engine_job()
        os.environ.update(DMLC_ROLE="worker", DMLC_WORKER_ID="0")
    elif "TF_CONFIG" not in os.environ:
        # The main process builds every combination's strategy before handing
        # the test to the pool (as TF's MWMS creator does, locally); it is not
        # a member of the engine job.
        return mirrored_strategy.MirroredStrategy(_devices())
    else:
        _join_engine_job()
    import byteps_native.tf as bps  # late: the engine starts from the environment set above
    return mirrored_strategy.MirroredStrategy(_devices(), cross_device_ops=bps.BytePSOps())


def _pool_initializer():
    _create_bytepsops_strategy()  # joins the engine job once, before any test


_pool = []


def _bytepsops_pool():
    if not _pool:
        _start_engine_job()
        cluster_spec = multi_worker_test_base.create_cluster_spec(
            has_chief=True, num_workers=PROCESSES - 1, num_ps=0, has_eval=False)
        _pool.append(multi_process_runner.MultiProcessPoolRunner(
            cluster_spec, initializer=_pool_initializer))
    return _pool[0]


def _bytepsops_distribution():
    name = f"BytePSOps{LAYOUT}CPU"
    if PROCESSES == 1:
        return combinations.NamedDistribution(name, _create_bytepsops_strategy, required_gpus=0)
    return combinations.NamedDistribution(name, _create_bytepsops_strategy, has_chief=True,
                                          num_workers=PROCESSES - 1, pool_runner_fn=_bytepsops_pool,
                                          no_xla=True)


# The 2x2 layout's one-process reference: 4 replicas on 4 logical CPUs,
# created as TF's Mirrored2CPUs is (a fresh collective key base per strategy:
# a reused key mixes two tests' collectives, and one aborted collective
# poisons every later one of the process).
mirrored_strategy_with_four_cpus = combinations.NamedDistribution(
    "Mirrored4CPUs",
    lambda: strategy_combinations._mirrored_strategy_with_collective_key_base(  # pylint: disable=protected-access
        [f"/cpu:{i}" for i in range(4)]),
    required_gpus=0)


def _four_logical_cpus_in_main_process():
    """test_util.main() queues test_util._set_logical_devices (2 logical CPUs)
    for after absl's init, looking the function up when main() runs; the 1x4
    reference needs 4 in the main process (where one-process strategies run),
    so the layout swaps that function before main() runs. Pool processes
    (TF_CONFIG set) keep TensorFlow's 2."""
    from tensorflow.python.distribute import test_util

    def _set_logical_devices():
        test_util.set_logical_devices_to_at_least("CPU", 4)

    test_util._set_logical_devices = _set_logical_devices  # pylint: disable=protected-access


def _references():
    if LAYOUT == "1x2":
        return [strategy_combinations.mirrored_strategy_with_two_cpus]
    if LAYOUT == "2x1":
        return [strategy_combinations.multi_worker_mirrored_2x1_cpu]
    if LAYOUT == "2x2":
        if "TF_CONFIG" not in os.environ:
            _four_logical_cpus_in_main_process()
        return [mirrored_strategy_with_four_cpus, strategy_combinations.multi_worker_mirrored_4x1_cpu]
    raise ValueError(f"BPS_UPSTREAM_LAYOUT={LAYOUT!r}: expected 1x2, 2x1 or 2x2")


bytepsops = _bytepsops_distribution()
STRATEGIES = _references() + [bytepsops]


def is_bytepsops(strategy):
    """Whether `strategy` reduces through BytePSOps (its replica count is global)."""
    from byteps_native.tf.cross_device_ops import BytePSOps
    return isinstance(getattr(strategy.extended, "_cross_device_ops", None), BytePSOps)
