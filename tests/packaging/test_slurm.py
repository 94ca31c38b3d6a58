"""deploy/slurm/byteps_job.sbatch in a real one-node Slurm cluster (Debian's
slurmctld + slurmd + munge, started here with a private configuration).

The recipe before ran the scheduler step and a worker step on node 0 without
`--overlap`: since Slurm 20.11 steps do not share CPUs, so the worker step
waited for the scheduler forever. Both behaviours are checked: the script
trains, and the same script without --overlap does not start its workers.
Skipped where Slurm is not installed or not root (scripts/install.sh installs
it on CI machines).
"""
import glob
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.support.ports import distinct_free_ports

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "deploy", "slurm", "byteps_job.sbatch")

pytestmark = pytest.mark.skipif(
    not (shutil.which("slurmctld") and shutil.which("slurmd") and shutil.which("munged") and os.geteuid() == 0),
    reason="needs Debian's slurmctld, slurmd and munge, as root (scripts/install.sh installs them)")



def _processes_with_env(entry):
    found = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                if entry.encode() in f.read().split(b"\0"):
                    found.append(int(path.split("/")[2]))
        except OSError:
            pass
    return [pid for pid in found if pid != os.getpid()]


def _munge_running():
    return subprocess.run(["sh", "-c", "munge -n | unmunge"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm")
    for sub in ("ctld", "d", "log", "run"):
        (root / sub).mkdir()
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    cpus = os.cpu_count() or 2
    ctld_port, d_port = distinct_free_ports(2)
    conf = root / "slurm.conf"
    conf.write_text(f"""
ClusterName=bpstest
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/ctld
SlurmdSpoolDir={root}/d
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName={host} CPUs={cpus} RealMemory=4000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=30 State=UP
""")
    # Two GPUs as generic resources without device files: enough for Slurm to
    # allocate --gpus-per-task (the recipe's GPU flags), none needed to run.
    for gpu in ("gpu0", "gpu1"):
        (root / gpu).write_text("")
    (root / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={root}/gpu[0-1]\n")
    env = dict(os.environ, SLURM_CONF=str(conf))
    started = []
    if not _munge_running():
        os.makedirs("/run/munge", exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged --force"], check=True)
        started.append("/run/munge/munged.pid")
    subprocess.run(["slurmctld", "-f", str(conf)], env=env, check=True)
    subprocess.run(["slurmd", "-f", str(conf)], env=env, check=True)
    started += [str(root / "run" / "slurmd.pid"), str(root / "run" / "slurmctld.pid")]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
            if out.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            pytest.fail("one-node Slurm did not come up: " + (root / "log" / "slurmctld.log").read_text()[-2000:])
        yield env, root
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True)
        for pidfile in started:  # only the daemons this fixture started, by pid
            try:
                os.kill(int(open(pidfile).read().strip()), 15)
            except (OSError, ValueError):
                pass
        # A daemon whose pid file was missing or that ignored SIGTERM was left
        # running after CI before: end every process of this private cluster.
        subprocess.run(["pkill", "-f", str(conf)], capture_output=True)
        time.sleep(1)
        subprocess.run(["pkill", "-9", "-f", str(conf)], capture_output=True)
        # Job steps (slurmstepd and what it ran) of a cancelled job outlived
        # the daemons: end every process whose environment names this cluster.
        for pid in _processes_with_env(f"SLURM_CONF={conf}"):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def _job_env(env):
    job = {k: v for k, v in env.items() if not k.startswith(("DMLC_", "BYTEPS_", "SLURM_J", "SLURM_S"))}
    job.update(WORKER_NODES="1", SERVER_NODES="0", GPUS_PER_WORKER="0", PROCS_PER_WORKER="2",
               CPUS_PER_WORKER=str(os.cpu_count() or 2), BYTEPS_TIMEOUT="60",
               PATH=os.path.dirname(sys.executable) + os.pathsep + env["PATH"])
    return job


def test_sbatch_script_passes_slurm_checks_and_trains(slurm_cluster):
    env, root = slurm_cluster
    out_file = root / "job.out"
    # sbatch parses every #SBATCH line first: a bad directive fails here.
    job = subprocess.run(["sbatch", "--nodes=1", "--time=5", "--wait", f"--output={out_file}", SCRIPT,
                          sys.executable, "-m", "byteps_native.examples.hello_push_pull"],
                         env=_job_env(env), capture_output=True, text=True, timeout=240)
    log = out_file.read_text() if out_file.exists() else ""
    assert job.returncode == 0, job.stderr + log[-3000:]
    assert log.count("(expected 3)") == 2, log[-3000:]


def test_without_overlap_the_worker_step_never_starts(slurm_cluster, tmp_path):
    """The bug the recipe had: reproduce it with the same script minus --overlap."""
    env, root = slurm_cluster
    script = tmp_path / "no_overlap.sbatch"
    script.write_text(open(SCRIPT).read().replace("srun --overlap ", "srun "))
    out_file = root / "no_overlap.out"
    submitted = subprocess.run(["sbatch", "--parsable", "--nodes=1", "--time=2", f"--output={out_file}", str(script),
                                sys.executable, "-m", "byteps_native.examples.hello_push_pull"],
                               env=_job_env(env), capture_output=True, text=True, timeout=60, check=True)
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        time.sleep(12)
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,
                               text=True).stdout.strip()
        log = out_file.read_text() if out_file.exists() else ""
        assert state == "RUNNING" and "(expected 3)" not in log, (state, log[-2000:])
    finally:
        subprocess.run(["scancel", job_id], env=env, capture_output=True)


def test_gpu_flags_are_accepted_by_slurm(slurm_cluster):
    """The worker step asks for its GPUs (--gpus-per-task) and CPUs
    (--cpus-per-task); Slurm allocates them on a node that has GPUs."""
    env, root = slurm_cluster
    out_file = root / "gpus.out"
    # Slurm sets SLURM_GPUS_ON_NODE in a step that was given GPUs.
    command = 'echo "gpus on node: ${SLURM_GPUS_ON_NODE:-none}"; exec "$0" -m byteps_native.examples.hello_push_pull'
    job = subprocess.run(["sbatch", "--nodes=1", "--time=5", "--wait", f"--output={out_file}", SCRIPT,
                          "sh", "-c", command, sys.executable],
                         env=dict(_job_env(env), GPUS_PER_WORKER="1", PROCS_PER_WORKER="2"),
                         capture_output=True, text=True, timeout=240)
    log = out_file.read_text() if out_file.exists() else ""
    assert job.returncode == 0, job.stderr + log[-3000:]
    assert log.count("gpus on node: 1") == 2 and log.count("(expected 3)") == 2, log[-3000:]
