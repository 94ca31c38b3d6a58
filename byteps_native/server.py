"""Run a dedicated parameter server.

BytePS roles (a scheduler at DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT):

    DMLC_ROLE=server python -m byteps_native.server

Next to torchrun workers, joining their store; tell the workers DMLC_NUM_SERVER:

    # workers started with --master_addr/--master_port (static rendezvous)
    DMLC_NUM_SERVER=4 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 python -m byteps_native.server
    # workers started with --rdzv_backend c10d --rdzv_endpoint 10.0.0.1:29500 [--rdzv_id JOB]
    DMLC_NUM_SERVER=4 python -m byteps_native.server --rdzv-endpoint 10.0.0.1:29500 [--rdzv-id JOB]

With c10d rendezvous the workers' store is not at the rendezvous endpoint:
torchrun's node-rank-0 agent opens a second TCPStore on a free port and
publishes its address in the rendezvous store. The server looks it up there
(the endpoint and id may also come from torchrun's own PET_RDZV_ENDPOINT and
PET_RDZV_ID variables, e.g. under Kubeflow).
"""
import argparse
import datetime
import os
import sys
import time

from byteps_native.roles import run

DEFAULT_RDZV_PORT = 29400  # torchrun's default when --rdzv_endpoint has no port


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m byteps_native.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default=os.environ.get("PET_RDZV_ENDPOINT"),
                        help="the workers' torchrun --rdzv_endpoint (c10d rendezvous): HOST[:PORT]")
    parser.add_argument("--rdzv-id", "--rdzv_id", default=os.environ.get("PET_RDZV_ID", "none"),
                        help="the workers' torchrun --rdzv_id (default: torchrun's default, 'none')")
    return parser.parse_args(argv)


def _split_endpoint(endpoint):
    """'host:port', 'host', '[v6::addr]:port' -> (host, port)."""
    if endpoint.startswith("["):
        host, _, rest = endpoint[1:].partition("]")
        port = rest.lstrip(":")
    elif endpoint.count(":") == 1:
        host, port = endpoint.split(":")
    else:
        host, port = endpoint, ""
    return host, int(port) if port else DEFAULT_RDZV_PORT


def _timeout():
    return float(os.environ.get("BYTEPS_RENDEZVOUS_TIMEOUT", "300"))


def worker_store_address(endpoint, run_id, timeout_s):
    """(MASTER_ADDR, MASTER_PORT) of the workers of the torchrun job whose
    c10d rendezvous is at `endpoint`, once a rendezvous round has completed.

    Each round r publishes the address under the rendezvous store's prefix
    'torch.rendezvous.<run_id>.<r>' (torch.distributed.elastic's
    RendezvousStoreInfo); the newest round is the running one.
    """
    import torch.distributed as dist

    host, port = _split_endpoint(endpoint)
    deadline = time.monotonic() + timeout_s
    store = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout_s))

    def key(round_, name):
        return f"torch.rendezvous.{run_id}.{round_}/{name}"

    next_report = time.monotonic()
    while True:
        round_ = -1
        while store.check([key(round_ + 1, "MASTER_PORT")]):
            round_ += 1
        if round_ >= 0:
            addr = store.get(key(round_, "MASTER_ADDR")).decode()
            return addr, int(store.get(key(round_, "MASTER_PORT")).decode())
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(
                f"no torchrun rendezvous with id '{run_id}' completed at {host}:{port} within {timeout_s:.0f} s "
                f"(BYTEPS_RENDEZVOUS_TIMEOUT); check that the workers use --rdzv_endpoint {endpoint} and "
                f"--rdzv_id {run_id}")
        if now >= next_report:
            print(f"byteps server: waiting for the torchrun rendezvous '{run_id}' at {host}:{port} to complete",
                  file=sys.stderr, flush=True)
            next_report = now + 30
        time.sleep(0.5)


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.rdzv_endpoint and not os.environ.get("DMLC_PS_ROOT_URI"):
        try:
            addr, port = worker_store_address(args.rdzv_endpoint, args.rdzv_id, _timeout())
        except Exception as e:  # noqa: BLE001 -- one clear line, never a traceback, for a launcher's log
            print(f"byteps server failed: {e}", file=sys.stderr, flush=True)
            return 1
        print(f"byteps server: torchrun workers' store is {addr}:{port}", file=sys.stderr, flush=True)
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)
    os.environ.setdefault("DMLC_ROLE", "server")
    return run("server")


if __name__ == "__main__":
    sys.exit(main())
