"""What every test worker shares: reporting results to the pytest process."""
import json
import os


def report(rank, obj):
    with open(os.path.join(os.environ["RESULT_DIR"], f"result.{rank}.json"), "w") as f:
        json.dump(obj, f)


def outcome(check):
    """Run `check()`; 'ok', or the error as text (each test asserts its own)."""
    try:
        check()
        return "ok"
    except Exception as error:  # reported, asserted by the test
        return f"{type(error).__name__}: {error}"
