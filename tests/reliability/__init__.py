"""Reliability: faults, bad input and hostile peers against a job whose
processes run on their own (tests.support.jobs.Job)."""
import os

from tests.support.jobs import Job

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")


class Cluster(Job):
    """A Job running this suite's worker scripts (workers/)."""

    def __init__(self, log_dir, **kwargs):
        super().__init__(log_dir, workers_dir=WORKERS, **kwargs)
