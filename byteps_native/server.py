"""Run a dedicated parameter server: `DMLC_ROLE=server python -m byteps_native.server`."""
import sys

from byteps_native.roles import run

if __name__ == "__main__":
    sys.exit(run("server"))
