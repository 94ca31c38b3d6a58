"""Run a dedicated parameter server: `DMLC_ROLE=server python -m byteps_native.server`."""
import sys

from byteps_native.core import _core


def main():
    try:
        _core.run_server()
    except _core.BytePSError as e:
        print(f"byteps server failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
