"""Run the rendezvous scheduler: `DMLC_ROLE=scheduler python -m byteps_native.scheduler`."""
import sys

from byteps_native.roles import run

if __name__ == "__main__":
    sys.exit(run("scheduler"))
