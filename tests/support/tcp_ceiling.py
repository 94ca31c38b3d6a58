"""The ceiling of a path between two emulated hosts: what several plain TCP
flows move per second, so a benchmark can put its own rate beside what the
veth pair, the bridge and the kernel allow on this machine (issue 26: "byteps
GB/s per machine against the veth path's own ceiling, measured in the same
call"). One process per flow: the flows never share an interpreter lock.

    python3 tcp_ceiling.py serve PORT FLOWS                # in the receiving host
    python3 tcp_ceiling.py send ADDRESS PORT FLOWS SECONDS # in the sending host; prints GB/s

Cluster.tcp_ceiling runs both ends in their namespaces.
"""
import multiprocessing
import socket
import sys
import time

CHUNK = 4 << 20


def _receive(conn):
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = 0
    while True:
        n = conn.recv_into(view)
        if n == 0:
            return total
        total += n


def serve(port, flows):
    ctx = multiprocessing.get_context("fork")  # each child inherits its connection
    with socket.create_server(("0.0.0.0", port), backlog=flows) as listener:
        children = []
        for _ in range(flows):
            conn = listener.accept()[0]
            child = ctx.Process(target=_receive, args=(conn,))
            child.start()
            conn.close()  # the child's copy closes when it has read everything
            children.append(child)
        for child in children:
            child.join()


def _send(args):
    address, port, seconds = args
    payload = bytes(CHUNK)
    with socket.create_connection((address, port)) as s:
        sent = 0
        begin = time.monotonic()
        while time.monotonic() - begin < seconds:
            s.sendall(payload)
            sent += len(payload)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)  # the receiver read everything and closed
        return sent, time.monotonic() - begin


def send(address, port, flows, seconds):
    with multiprocessing.Pool(flows) as pool:
        results = pool.map(_send, [(address, port, seconds)] * flows)
    total = sum(r[0] for r in results)
    elapsed = max(r[1] for r in results)
    print(f"{total / elapsed / 1e9:.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
