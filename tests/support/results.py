"""How a worker process tells the test what it found: each rank writes
$RESULT_DIR/result.<rank>.json; the test collects them by rank.
Assertions stay in the test, so a failure shows every rank's findings."""
import json
import os


def rank_from_env():
    """The global rank: torch's RANK, else BytePS's machine x local size + local rank."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"])
    return (int(os.environ.get("DMLC_WORKER_ID", 0)) * int(os.environ.get("BYTEPS_LOCAL_SIZE", 1))
            + int(os.environ.get("BYTEPS_LOCAL_RANK", 0)))


def report(obj, rank=None):
    """Called inside a worker: writes this rank's findings (JSON) for the test."""
    rank = rank_from_env() if rank is None else rank
    path = os.path.join(os.environ["RESULT_DIR"], f"result.{rank}.json")
    with open(path + ".tmp", "w") as f:  # whole or absent: the test may read while a hung rank is stopped
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def outcome(check):
    """Runs `check()`; 'ok', or the error as text (each test asserts its own)."""
    try:
        check()
        return "ok"
    except Exception as error:  # reported, asserted by the test
        return f"{type(error).__name__}: {error}"


def collect(result_dir):
    """{rank: reported object} of every rank that reported."""
    found = {}
    for name in os.listdir(str(result_dir)):
        if name.startswith("result.") and name.endswith(".json"):
            with open(os.path.join(str(result_dir), name)) as f:
                found[int(name.split(".")[1])] = json.load(f)
    return found
