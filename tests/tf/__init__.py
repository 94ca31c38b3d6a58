"""The TensorFlow adapter: strategies, cross-device ops, the Horovod-style API
and Keras in real multi-process jobs; upstream TensorFlow tests under upstream/.

The jobs here run the scheduler and servers through the engine's C entry
points alone (tests.support.jobs.role_argv "engine"), so these tests depend on
nothing but the engine and the TF adapter."""
import os
import tempfile

from tests.support.jobs import Job

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")

# Start-up on a loaded 2-core host can take longer than a short timeout.
JOB_SETTINGS = {"BYTEPS_TIMEOUT": "60", "BYTEPS_RENDEZVOUS_TIMEOUT": "60"}


def run_job(worker_script, num_workers=2, num_servers=1, args=(), env=None, timeout=240, local_sizes=None):
    """Runs workers/<worker_script> on every worker; returns WorkerOutcomes by
    rank. `local_sizes`: machine m runs local_sizes[m] processes (machines of
    different sizes, issue 29); default one process per machine."""
    sizes = local_sizes or [1] * num_workers
    settings = dict(JOB_SETTINGS, **(env or {}))
    with Job(tempfile.mkdtemp(prefix="bps_tf_test_"), machines=len(sizes), servers=num_servers, workers_dir=WORKERS,
             roles="engine", **settings) as job:
        job.start_servers()
        placement = [(machine, local_rank, size) for machine, size in enumerate(sizes) for local_rank in range(size)]
        for rank, (machine, local_rank, size) in enumerate(placement):
            job.start_worker(machine, local_rank, worker_script, *args, rank=rank, local_size=size)
        return job.finish_workers(timeout)
