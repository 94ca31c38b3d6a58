"""Run the rendezvous scheduler: `DMLC_ROLE=scheduler python -m byteps_native.scheduler`."""
import sys

from byteps_native.core import _core


def main():
    try:
        _core.run_scheduler()
    except _core.BytePSError as e:
        print(f"byteps scheduler failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
