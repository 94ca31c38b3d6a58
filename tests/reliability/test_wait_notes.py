"""Issue 19 launch UX: every wait longer than a few seconds says, every few
seconds, what it waits for and how many have arrived -- not silence until
BYTEPS_RENDEZVOUS_TIMEOUT (300 s by default). The worker waiting for an
unreachable scheduler: tests/packaging/test_launch_messages.py."""
import re

from tests.reliability import Cluster


def _notes(output, pattern):
    return [line for line in output.splitlines() if re.search(pattern, line)]


def test_a_missing_worker_is_announced_by_scheduler_worker_and_server(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_RENDEZVOUS_TIMEOUT=9, BYTEPS_TIMEOUT=20) as c:
        scheduler = c.start_role("scheduler", "scheduler")
        server = c.start_role("server", "server 0")
        worker = c.start_worker(0, 0, "train_loop.py", 5)  # worker 1 never comes
        codes = c.wait_all(60)
        assert all(rc not in (None, 0) for rc in codes.values()), c.dump()
        says = {
            # Machines, not ranks: the rank count is known once every machine
            # said its local size (machines may differ in size, issue 29).
            "scheduler": (scheduler, r"waiting for workers: 1 of 2 machines arrived; still waiting "
                                     r"\(\d+ s of 9 s, BYTEPS_RENDEZVOUS_TIMEOUT\)"),
            "worker": (worker, r"waiting for the other workers: 1 of 2 machines arrived \(machine 1 not yet\); "
                               r"still waiting \(\d+ s of 9 s, BYTEPS_RENDEZVOUS_TIMEOUT\)"),
            "server": (server, r"server 0 is waiting for the workers: 1 of 2 machines arrived; still waiting"),
        }
        for who, (proc, pattern) in says.items():
            assert _notes(proc.output(), pattern), f"{who} said nothing while waiting:\n{c.dump()}"
        # Before the end: at 4 and 8 s of the 9.
        assert len(_notes(worker.output(), r"waiting for the other workers")) >= 2, c.dump()


def test_a_server_that_never_starts_is_announced_by_the_workers(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_RENDEZVOUS_TIMEOUT=9, BYTEPS_TIMEOUT=20) as c:
        c.start_role("scheduler", "scheduler")  # no server
        workers = [c.start_worker(m, 0, "train_loop.py", 5) for m in range(2)]
        codes = c.wait_all(60)
        assert all(codes[f"worker {m}"] not in (None, 0) for m in range(2)), c.dump()
        for w in workers:
            out = w.output()
            assert _notes(out, r"waiting for server 0 of 1 to register \(0 registered so far\); still waiting "
                               r"\(\d+ s of 9 s, BYTEPS_RENDEZVOUS_TIMEOUT\); check DMLC_NUM_SERVER"), c.dump()
            assert "server 0 of 1 never registered within 9 s" in out, c.dump()
