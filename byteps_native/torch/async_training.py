"""BytePS's asynchronous training (BYTEPS_ENABLE_ASYNC=1).

The servers then answer each push at once with the running sum of everything
pushed under that name. The global weights live there: rank 0 seeds them
with its initial weights, and every step each worker pushes its local update
(new - old weights) and adopts the running sum it gets back.

`staleness` k lets a worker run k steps past its last pulled weights: up to
k+1 pushes are in flight, and when the pull for step t arrives the worker
re-applies its own deltas of the steps after t on top of it.

Every push_pull under async answers immediately, so no collective can serve
as a barrier; the seeding waits on a flag (the running sum of a counter that
only rank 0 increments) instead.
"""
import time

import torch

from byteps_native.torch import engine
from byteps_native.torch.extension import _c10d

_SEED_POLL_S = 0.02


class AsyncParameterSync:
    def __init__(self, params, names, staleness):
        if staleness < 0:
            raise ValueError(f"staleness must be >= 0, got {staleness}")
        self._params = [p for p in params if p.requires_grad]
        self._names = [f"AsyncParam.{names[p]}" for p in self._params]
        self._staleness = int(staleness)
        self._pending = []  # (buffers whose futures bring W_t, futures, deltas of step t)
        self._seed()

    def _push(self, tensor, name):
        return _c10d.push_pull_async(tensor, name, 0, False, None)

    def _seed(self):
        root = engine.rank() == 0
        with torch.no_grad():
            for p, name in zip(self._params, self._names):
                contribution = p.detach().clone() if root else torch.zeros_like(p)
                self._push(contribution, name).wait()
            flag = torch.zeros(1, dtype=torch.int32)
            while True:  # every local rank loops in lock step (its machine's pushes are summed locally)
                flag.fill_(1 if root else 0)
                self._push(flag, "AsyncParam.__seeded__").wait()
                if int(flag) >= 1:
                    break
                time.sleep(_SEED_POLL_S)
            for p, name in zip(self._params, self._names):
                weights = torch.zeros_like(p)
                self._push(weights, name).wait()
                p.copy_(weights)

    def step(self, local_step):
        with torch.no_grad():
            before = [p.detach().clone() for p in self._params]
        loss = local_step()
        with torch.no_grad():
            deltas = [p.detach() - b for p, b in zip(self._params, before)]
            buffers = [d.clone() for d in deltas]
            futures = [self._push(buf, name) for buf, name in zip(buffers, self._names)]
            self._pending.append((buffers, futures, deltas))
            while len(self._pending) > self._staleness:
                self._adopt(self._pending.pop(0))
        return loss

    def _adopt(self, entry):
        buffers, futures, _ = entry
        for future in futures:
            future.wait()
        for i, p in enumerate(self._params):
            newer = sum((pending[2][i] for pending in self._pending), torch.zeros_like(p))
            p.copy_(buffers[i] + newer)

    def drain(self):
        """Adopt every in-flight pull (end of training)."""
        with torch.no_grad():
            while self._pending:
                self._adopt(self._pending.pop(0))
