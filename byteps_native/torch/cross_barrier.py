"""Cross-barrier training (ByteScheduler's design; BytePS's ``CrossBarrier``).

Without it every framework path waits for all gradients before the next
forward pass. With it

    optimizer = bps.CrossBarrier(model, optimizer, num_steps=N)

each parameter is updated as soon as its own sum arrives, and the next forward
pass waits per module -- in a forward pre-hook, for the parameters that module
uses first -- not for the whole model. The first layers' gradients, which the
next forward needs first, go first on the wire (priority = the order in which
the first forward pass used the parameters), so the next forward starts while
the last layers' sums are still travelling.

How an update runs: the user's own optimizer class steps once per parameter,
on a shallow copy of the optimizer whose ``param_groups`` hold one group with
that one parameter and the hyper-parameters as they were when ``step()`` was
called. Optimizer state is keyed by parameter and shared, so any
``torch.optim`` optimizer that steps without a closure works, foreach and
fused paths included, and gives the bits the plain optimizer gives. An LR
scheduler's change made after ``step()`` applies from the next step's updates,
exactly as without cross-barrier.

Between ``backward()`` and the update a parameter's ``.grad`` is a stand-in
that refuses every operation (the real gradient is being summed): code that
needs all gradients first -- ``clip_grad_norm_``, ``GradScaler`` -- fails at
once with an error saying to call ``optimizer.synchronize()`` first, which waits
for every sum and puts the real gradients back (that step then keeps the
barrier). docs/cross_barrier.md has the whole contract.

On CUDA the waits are stream-ordered: updates run on a side stream after the
sum's events, each records an event, and a forward pre-hook makes the current
stream wait on it; the host waits only for an update not yet launched.
"""
import collections
import contextlib
import inspect
import threading
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from byteps_native._runtime import config, lifecycle
from byteps_native.compression import apply_to
from byteps_native.torch import join_protocol as _join
from byteps_native.torch.compression import Compression, wire_dtype_for, wire_name
from byteps_native.torch.ops import _require_init, engine_name

_FIX = ("call optimizer.synchronize() after backward() and before such code: it waits for every sum and puts the "
        "real gradients back (that step keeps the barrier; the others still cross it)")


class _InFlightGrad(torch.Tensor):
    """Stands in ``p.grad`` while the real gradient is summed across ranks:
    it holds no data and every operation on it raises, naming the parameter
    and the fix, instead of reading a half-summed buffer."""

    @staticmethod
    def __new__(cls, like, name):
        t = torch.Tensor._make_wrapper_subclass(cls, like.shape, dtype=like.dtype, device=like.device,
                                                strides=like.stride(), requires_grad=False)
        t._bps_name = name
        return t

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        names = sorted({a._bps_name for a in tree_flatten((args, kwargs))[0] if isinstance(a, _InFlightGrad)})
        raise RuntimeError(
            f"CrossBarrier: {func} used the gradient of {', '.join(repr(n) for n in names)} while it is still "
            "being summed across ranks. Cross-barrier applies each parameter's update as soon as its own sum "
            "arrives, so code that needs every gradient between backward() and step() (clip_grad_norm_, "
            f"GradScaler's unscale_/step, reading .grad) must wait for them: {_FIX}. A second backward() before "
            "step() needs backward_passes_per_step=2 (or DDP's no_sync()) instead.")

    def __repr__(self):
        return f"<gradient of {self._bps_name!r} being summed across ranks>"


class _Slot:
    """One parameter's round: its gradient on the wire, then its update."""

    def __init__(self, param, name, group):
        self.param = param
        self.name = name
        self.group = group        # index into param_groups
        self.priority = 0
        self.passes = 0           # backward passes accumulated since the last submission
        self.submitted = False    # submitted since the last step()
        self.busy = False         # a round in flight, or its update not launched yet
        self.round = 0
        self.future = None
        self.buffer = None        # the real gradient, summed in place
        self.summed = False
        self.release = None       # the _Release of the step() that applies it
        self.discard = False      # zero_grad() before step(): drop the sum
        self.done_event = None    # CUDA: recorded after the update


class _Release:
    """What step() k fixes for its updates: the hyper-parameters as they were
    then, and (CUDA) an event after the caller's work on the gradients."""

    def __init__(self, index, groups, events):
        self.index = index
        self.groups = groups
        self.events = events


class _FirstUse(TorchFunctionMode):
    """During the first forward pass: which module uses each parameter first,
    in order. Sees every torch call's arguments, so a parameter used by another
    module than its owner (tied weights, functional calls) is found too."""

    def __init__(self, slots, stack):
        super().__init__()
        self.slots = slots
        self.stack = stack
        self.order = []  # (slot, module) in order of first use
        self.seen = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        for a in tree_flatten((args, kwargs))[0]:
            if isinstance(a, torch.nn.Parameter) and id(a) not in self.seen:
                slot = self.slots.get(a)
                if slot is not None:
                    self.seen.add(id(a))
                    self.order.append((slot, self.stack[-1]))
        return func(*args, **(kwargs or {}))


_live = weakref.WeakSet()


def _drain_all():
    """Engine stop hook: apply the updates still pending before the engine goes."""
    for cb in list(_live):
        with contextlib.suppress(Exception):
            cb.wait_for_updates(timeout=30)


lifecycle.on_init(lambda: None, stop=_drain_all)


def _requires_closure(optimizer):
    try:
        parameter = inspect.signature(type(optimizer).step).parameters.get("closure")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.default is inspect.Parameter.empty


class _CrossBarrier:
    """Methods of the optimizer CrossBarrier returns: a subclass of the user's
    optimizer class whose instance shares the user's param_groups and state."""

    # ------------------------------------------------------------ set-up

    def _cb_setup(self, base, model, names, compression, backward_passes_per_step, num_steps):
        self._cb_base = base
        step = base.step
        # The class's step without torch's hook wrapper: the user's step hooks
        # run once per step() (around ours), not once per parameter.
        self._cb_base_step = step.__wrapped__ if getattr(step, "hooked", False) else step
        self._cb_ddp = model if isinstance(model, torch.nn.parallel.DistributedDataParallel) else None
        self._cb_model = model
        self._cb_compression = compression
        self._cb_passes = backward_passes_per_step
        self._cb_num_steps = num_steps
        self._cb_steps = 0
        self._cb_cv = threading.Condition()
        self._cb_queue = collections.deque()
        self._cb_error = None
        self._cb_checked_groups = False
        self._cb_sync_pass = True   # DDP: this forward's backward is reduced (not under no_sync())
        self._cb_backward_since_step = False  # a gradient was made since the last step(): synchronize() has work
        self._cb_streams = {}
        self._cb_slots = {}
        for gi, group in enumerate(self.param_groups):
            for p in group["params"]:
                if p.requires_grad:
                    self._cb_slots[p] = _Slot(p, names[p], gi)
        self._cb_unseen = []        # trainable parameters the first forward did not use
        self._cb_forward_order = list(self._cb_slots.values())  # until the first forward says
        self._cb_recorded = False
        self._cb_handles = [p.register_post_accumulate_grad_hook(self._cb_on_grad) for p in self._cb_slots]
        self._cb_handles.append(model.register_forward_pre_hook(self._cb_root_pre, prepend=True))
        self._cb_handles.append(model.register_forward_hook(self._cb_root_post, always_call=True))
        for module in model.modules():
            if next(module.parameters(recurse=False), None) is not None or module is model:
                self._cb_handles.append(module.register_state_dict_pre_hook(self._cb_before_state_dict))
        self._cb_recorder = None
        self._cb_stack = []
        self._cb_record_handles = []
        self._cb_updater = threading.Thread(target=self._cb_update_loop, name="byteps-cross-barrier", daemon=True)
        self._cb_stop = False
        self._cb_updater.start()
        _live.add(self)

    # ------------------------------------------------------------ forward side

    def _cb_root_pre(self, module, args):
        if self._cb_ddp is not None:
            # DDP's own reduction is switched off: the reduction is ours. Its
            # flag still says whether this forward's backward is reduced (no_sync()).
            self._cb_sync_pass = self._cb_ddp.require_backward_grad_sync
            self._cb_ddp.require_backward_grad_sync = False
        if not self._cb_recorded and self._cb_recorder is None:
            self._cb_start_recording()
        elif self._cb_unseen:
            self._cb_wait(self._cb_unseen)

    def _cb_root_post(self, module, args, output):
        if self._cb_ddp is not None:
            self._cb_ddp.require_backward_grad_sync = self._cb_sync_pass
            # As after a reduced DDP forward: the next one broadcasts buffers.
            self._cb_ddp.require_forward_param_sync = torch.is_grad_enabled() and self._cb_sync_pass
        if self._cb_recorder is not None:
            self._cb_finish_recording()

    def _cb_start_recording(self):
        self._cb_stack[:] = [self._cb_model]
        for m in self._cb_model.modules():
            if m is self._cb_model:
                continue
            self._cb_record_handles.append(m.register_forward_pre_hook(self._cb_enter_module))
            self._cb_record_handles.append(m.register_forward_hook(self._cb_leave_module, always_call=True))
        self._cb_recorder = _FirstUse(self._cb_slots, self._cb_stack)
        self._cb_recorder.__enter__()

    def _cb_enter_module(self, module, args):
        self._cb_stack.append(module)

    def _cb_leave_module(self, module, args, output):
        self._cb_stack.pop()

    def _cb_finish_recording(self):
        recorder, self._cb_recorder = self._cb_recorder, None
        recorder.__exit__(None, None, None)
        for h in self._cb_record_handles:
            h.remove()
        self._cb_record_handles = []
        self._cb_recorded = True
        waits = collections.OrderedDict()
        for i, (slot, module) in enumerate(recorder.order):
            slot.priority = -i
            waits.setdefault(module, []).append(slot)
        seen = {id(s) for s, _ in recorder.order}
        # Not used in the first forward: waited for at the start of every
        # forward (correct wherever they are used), and first on the wire.
        self._cb_unseen = [s for s in self._cb_slots.values() if id(s) not in seen]
        for s in self._cb_unseen:
            s.priority = 1
        self._cb_forward_order = sorted(self._cb_slots.values(), key=lambda s: -s.priority)
        for module, slots in waits.items():
            if module is self._cb_model:
                self._cb_unseen = slots + self._cb_unseen
                continue
            self._cb_handles.append(module.register_forward_pre_hook(
                lambda mod, a, slots=slots: self._cb_wait(slots), prepend=True))

    def _cb_wait(self, slots):
        """Forward pre-hook: the updates these parameters are due (step() was
        called) have been applied -- on CUDA, queued before the current stream's next work."""
        with self._cb_cv:
            for slot in slots:
                while slot.busy and slot.release is not None and self._cb_error is None:
                    self._cb_cv.wait()
            self._cb_raise_if_failed()
            events = [(s.param.device, s.done_event) for s in slots if s.done_event is not None]
        for device, event in events:
            torch.cuda.current_stream(device).wait_event(event)

    # ------------------------------------------------------------ backward side

    def _cb_on_grad(self, p):
        self._cb_backward_since_step = True  # also a DDP no_sync() pass: its gradients are this step's
        if self._cb_ddp is not None and not self._cb_sync_pass:
            return
        slot = self._cb_slots[p]
        slot.passes += 1
        if slot.passes >= self._cb_passes:
            self._cb_submit(slot)

    def _cb_submit(self, slot):
        p = slot.param
        with self._cb_cv:
            if slot.submitted:
                raise RuntimeError(
                    f"CrossBarrier: the gradient of {slot.name!r} was computed again before optimizer.step(); call "
                    "step() after each backward(), or accumulate with backward_passes_per_step=N (or DDP's no_sync())")
            # The previous round of this name must be over (a parameter the
            # forward pass did not use, or a discarded sum, may still be).
            while slot.busy and self._cb_error is None:
                self._cb_cv.wait()
            self._cb_raise_if_failed()
        grad = p.grad
        if grad is None or isinstance(grad, _InFlightGrad):  # every rank pushes every gradient
            grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        if grad.is_sparse:
            raise RuntimeError(f"CrossBarrier: the gradient of {slot.name!r} is sparse; cross-barrier sums dense "
                               "gradients only: use nn.Embedding(..., sparse=False), or DistributedOptimizer")
        if not grad.is_contiguous():
            grad = grad.contiguous()
        wire_dtype = wire_dtype_for(self._cb_compression, grad)
        name = wire_name(engine_name(f"CrossBarrier.grad.{slot.name}", grad), wire_dtype)
        apply_to(name, self._cb_compression)
        future = _join.push_pull_async(grad, name, slot.priority, True, wire_dtype)
        with self._cb_cv:
            slot.round += 1
            slot.busy, slot.submitted, slot.summed = True, True, False
            slot.release, slot.discard, slot.done_event = None, False, None
            slot.future, slot.buffer, slot.passes = future, grad, 0
            this_round = slot.round
        p.grad = _InFlightGrad(p, slot.name)
        future.add_done_callback(lambda _f, s=slot, r=this_round: self._cb_arrived(s, r))

    def _cb_arrived(self, slot, round_):
        with self._cb_cv:
            if slot.round != round_:
                return
            slot.summed = True
            if slot.release is not None or slot.discard:
                self._cb_queue.append(slot)
            self._cb_cv.notify_all()

    # ------------------------------------------------------------ updates (one thread)

    # Updates ready at once (on one machine of GPUs every sum is there by
    # step()) go through the optimizer together, up to this many elements,
    # in forward order: one foreach launch instead of one per parameter,
    # while the first layers' updates still come first.
    _CB_BATCH_ELEMENTS = 1 << 20

    def _cb_take_batch(self):
        first = self._cb_queue.popleft()
        batch, elements = [first], first.param.numel()
        while self._cb_queue and not first.discard:
            nxt = self._cb_queue[0]
            if (nxt.discard or nxt.release is not first.release or nxt.group != first.group
                    or nxt.param.device != first.param.device
                    or elements + nxt.param.numel() > self._CB_BATCH_ELEMENTS):
                break
            batch.append(self._cb_queue.popleft())
            elements += nxt.param.numel()
        return batch

    def _cb_update_loop(self):
        while True:
            with self._cb_cv:
                while not self._cb_queue and not self._cb_stop:
                    self._cb_cv.wait()
                if self._cb_stop and not self._cb_queue:
                    return
                batch = self._cb_take_batch()
            try:
                self._cb_apply(batch)
            except BaseException as error:  # noqa: BLE001 -- handed to every waiter
                with self._cb_cv:
                    if self._cb_error is None:
                        names = ", ".join(repr(s.name) for s in batch)
                        self._cb_error = RuntimeError(f"CrossBarrier: the update of {names} failed: {error}")
                        self._cb_error.__cause__ = error
            with self._cb_cv:
                for slot in batch:
                    slot.busy = False
                    slot.release = slot.future = slot.buffer = None
                self._cb_cv.notify_all()

    def _cb_stream(self, device):
        stream = self._cb_streams.get(device)
        if stream is None:
            stream = self._cb_streams[device] = torch.cuda.Stream(device=device)
        return stream

    def _cb_apply(self, batch):
        first = batch[0]
        if not first.param.is_cuda:
            for slot in batch:
                slot.future.wait()  # raises the engine's error (a dead rank, a timeout)
            if not first.discard:
                self._cb_update(batch)
            return
        device = first.param.device
        stream = self._cb_stream(device)
        with torch.cuda.device(device), torch.cuda.stream(stream):
            for slot in batch:
                slot.future.wait()  # this stream now runs after the sum
            if not first.discard:
                event = first.release.events.get(device)
                if event is not None:
                    stream.wait_event(event)  # and after the caller's work on the gradients up to step()
                self._cb_update(batch)
                done = torch.cuda.Event()
                done.record(stream)
                for slot in batch:
                    slot.done_event = done
            # The gradients were made on the compute stream: their memory must
            # not be reused there before this stream is done with them.
            for slot in batch:
                slot.buffer.record_stream(stream)

    def _cb_update(self, batch):
        release, index = batch[0].release, batch[0].group
        for slot in batch:
            p = slot.param
            if p.grad is None or isinstance(p.grad, _InFlightGrad):
                p.grad = slot.buffer
        shadow = object.__new__(self._cb_base)
        shadow.__dict__.update(self.__dict__)
        shadow.__dict__.pop("step", None)
        group = dict(release.groups[index])
        group["params"] = [slot.param for slot in batch]
        shadow.param_groups = [group]
        with torch.no_grad():
            self._cb_base_step(shadow)
        if not self._cb_checked_groups:
            self._cb_checked_groups = True
            before = release.groups[index]
            changed = sorted(k for k in set(group) | set(before)
                             if k != "params" and group.get(k, _Slot) is not before.get(k, _Slot))
            if changed:
                raise RuntimeError(
                    f"{self._cb_base.__name__}.step() changes its param_groups ({', '.join(changed)}): it keeps "
                    "state per group, which cross-barrier would advance once per parameter. Cross-barrier needs "
                    "an optimizer whose state is per parameter (every torch.optim one but LBFGS); use "
                    "DistributedOptimizer for this one")
        for slot in batch:
            slot.param.grad = None

    # ------------------------------------------------------------ the optimizer's face

    def _cb_raise_if_failed(self):
        if self._cb_error is not None:
            raise self._cb_error

    def _cb_submit_missing(self):
        for slot in self._cb_slots.values():
            if not slot.submitted:
                self._cb_submit(slot)

    def synchronize(self):
        """Wait for every gradient's sum (submitting those not started, as
        zeros where a parameter got none) and put the real, averaged gradients
        back into .grad, for code that needs them all before step():
        clip_grad_norm_, GradScaler. The updates still wait for step().
        Without a gradient since the last step() there is nothing of this
        step to sum, and it returns at once: a round of zeros for every
        parameter would cost a whole step's link time, and a rank calling it
        there when the others do not would disagree with them on every
        parameter's round (issue 38: a benchmark did, and timed that round).
        wait_for_updates() is the wait for the updates in flight."""
        if not self._cb_backward_since_step:
            return
        self._cb_submit_missing()
        with self._cb_cv:
            for slot in self._cb_slots.values():
                while slot.busy and not slot.summed and self._cb_error is None:
                    self._cb_cv.wait()
            self._cb_raise_if_failed()
            for slot in self._cb_slots.values():
                if slot.busy and slot.release is None and not slot.discard:
                    slot.future.wait()  # done; on CUDA, orders the current stream after the sum
                    if isinstance(slot.param.grad, _InFlightGrad):
                        slot.param.grad = slot.buffer

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Horovod's name, for scripts written for DistributedOptimizer: step()
        never sums a gradient twice, so there is nothing to skip."""
        yield

    def step(self, closure=None):
        """Apply this step's updates, each as soon as its sum arrives; returns
        at once (after the num_steps-th call: once they are all applied)."""
        if closure is not None:
            raise RuntimeError("CrossBarrier.step() takes no closure: the updates are applied as the sums arrive, "
                               "after the backward() you ran; compute the loss and backward() before step()")
        self._cb_raise_if_failed()
        self._cb_submit_missing()
        groups = []
        for group in self.param_groups:
            groups.append({k: (v.clone() if torch.is_tensor(v) else v) for k, v in group.items() if k != "params"})
        events = {}
        for slot in self._cb_slots.values():
            if slot.param.is_cuda and slot.param.device not in events:
                events[slot.param.device] = torch.cuda.Event()
                events[slot.param.device].record(torch.cuda.current_stream(slot.param.device))
        release = _Release(self._cb_steps, groups, events)
        with self._cb_cv:
            self._cb_backward_since_step = False
            for slot in self._cb_forward_order:
                slot.submitted = False
                if slot.busy and slot.release is None and not slot.discard:
                    slot.release = release
                    if slot.summed:
                        self._cb_queue.append(slot)
            self._cb_cv.notify_all()
        self._cb_steps += 1
        self.__dict__.get("_cb_inner", self)._opt_called = True  # LR schedulers' order check
        if self._cb_num_steps is not None and self._cb_steps == self._cb_num_steps:
            self.wait_for_updates()
        return None

    def wait_for_updates(self, timeout=None):
        """Block until every update step() released has been applied (on CUDA:
        the current stream waits for them). Reading parameters outside a
        forward pass -- evaluation code that does not call the model, a
        checkpoint -- needs this; model.state_dict() and
        optimizer.state_dict() call it themselves."""
        with self._cb_cv:
            ok = self._cb_cv.wait_for(lambda: self._cb_error is not None or not any(
                s.busy and s.release is not None for s in self._cb_slots.values()), timeout)
            self._cb_raise_if_failed()
            if not ok:
                raise TimeoutError(f"CrossBarrier: updates still pending after {timeout} s")
            events = [(s.param.device, s.done_event) for s in self._cb_slots.values() if s.done_event is not None]
        for device, event in events:
            torch.cuda.current_stream(device).wait_event(event)

    def _cb_before_state_dict(self, *args, **kwargs):
        self.wait_for_updates()

    def zero_grad(self, set_to_none=True):
        """Clears gradients not on their way to an update: one whose update
        step() released is cleared by that update; one being summed before
        step() has its sum dropped."""
        with self._cb_cv:
            for slot in self._cb_slots.values():
                slot.passes = 0
                p = slot.param
                if slot.busy and slot.release is not None:
                    continue
                if slot.busy:
                    slot.discard, slot.submitted = True, False
                    if slot.summed:
                        self._cb_queue.append(slot)
                        self._cb_cv.notify_all()
                    p.grad = None
                elif p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.detach_().zero_()
            for group in self.param_groups:  # parameters CrossBarrier does not reduce (no grad required)
                for p in group["params"]:
                    if p not in self._cb_slots and p.grad is not None:
                        p.grad = None

    def state_dict(self):
        self.wait_for_updates()
        return self._cb_base.state_dict(self)

    def load_state_dict(self, state_dict):
        self.wait_for_updates()
        return self._cb_base.load_state_dict(self, state_dict)

    def add_param_group(self, param_group):
        if "_cb_slots" not in self.__dict__:  # Optimizer.__init__ of the inner optimizer
            return self._cb_base.add_param_group(self, param_group)
        raise RuntimeError("CrossBarrier: add every param group before wrapping the optimizer in CrossBarrier "
                           "(its hooks are set on the parameters it was given)")

    def close(self):
        """Apply what is pending, then stop: hooks removed, DDP's own
        reduction back on. The optimizer then steps as a plain one would."""
        self.wait_for_updates()
        for h in self._cb_handles:
            h.remove()
        self._cb_handles = []
        if self._cb_ddp is not None:
            self._cb_ddp.require_backward_grad_sync = True
        with self._cb_cv:
            self._cb_stop = True
            self._cb_cv.notify_all()
        _live.discard(self)


def CrossBarrier(model, optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                 num_steps=10 ** 6, compression_params=None):
    """BytePS's ``CrossBarrier(model, optimizer, named_parameters, compression,
    backward_passes_per_step, num_steps)``: train with each parameter updated
    as soon as its own averaged gradient arrives and the next forward pass
    waiting per module.

    model: the module whose forward uses the optimizer's parameters, or a
    ``DistributedDataParallel`` wrapping it (DDP's own gradient reduction is
    then switched off; ``no_sync()`` still accumulates). optimizer: a plain
    torch optimizer (not a DistributedOptimizer); the returned object replaces
    it. num_steps: the step() after which every update is applied before
    step() returns (None: never); model.state_dict(), optimizer.state_dict()
    and wait_for_updates() wait in any case. compression: as
    DistributedOptimizer's (Compression.fp16, engine compressors);
    compression_params (BytePS's dict) is not taken.
    """
    if compression_params is not None:
        raise ValueError("CrossBarrier: compression_params (BytePS's compressor dict) is not taken; pass "
                         "compression=Compression.fp16, Compression.onebit, Compression.topk(0.01), ...")
    if compression is None:
        compression = Compression.none
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"CrossBarrier needs a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if "_cb_slots" in optimizer.__dict__ or "_futures" in optimizer.__dict__:
        raise ValueError("CrossBarrier takes the plain torch optimizer, not a DistributedOptimizer or another "
                         "CrossBarrier: it reduces the gradients itself")
    if _requires_closure(optimizer):
        raise ValueError(
            f"CrossBarrier cannot run {type(optimizer).__name__}: its step() needs a closure that re-evaluates "
            "the loss (several forward and backward passes per step), so no parameter can be updated before all "
            "gradients are known. Use DistributedOptimizer for it")
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    if isinstance(model, torch.nn.parallel.DistributedDataParallel) and model.static_graph:
        raise ValueError("CrossBarrier replaces DDP's gradient reduction, which static_graph=True fixes in "
                         "advance; build DistributedDataParallel without static_graph")
    if config.asynchronous():
        raise ValueError("CrossBarrier is synchronous training; BYTEPS_ENABLE_ASYNC=1 is set (async training "
                         "pulls the servers' weights instead): use DistributedOptimizer, or unset it")
    _require_init("CrossBarrier")
    names = _names_of(model, optimizer, named_parameters)
    base = type(optimizer)
    cls = type(base.__name__, (base,), {k: v for k, v in vars(_CrossBarrier).items()
                                        if k not in ("__dict__", "__weakref__", "__module__", "__doc__", "__qualname__")})
    cls.step = torch.optim.Optimizer.profile_hook_step(cls.step)
    cls.step.hooked = True
    cls.__module__ = __name__
    cls.__doc__ = f"{base.__name__}, under cross-barrier training (byteps_native.torch.CrossBarrier)."
    wrapped = object.__new__(cls)
    wrapped.__dict__.update({k: v for k, v in optimizer.__dict__.items() if k != "step"})
    wrapped._cb_inner = optimizer
    wrapped._cb_setup(base, model, names, compression, backward_passes_per_step, num_steps)
    return wrapped


def _names_of(model, optimizer, named_parameters):
    named = list(named_parameters) if named_parameters is not None else list(model.named_parameters())
    if any(not isinstance(item, tuple) for item in named):
        raise ValueError("named_parameters should be a sequence of (name, parameter) tuples, "
                         "usually produced by model.named_parameters()")
    by_param = {}
    for name, p in named:
        by_param.setdefault(p, name)
    if len(set(by_param.values())) != len(by_param):
        raise ValueError("CrossBarrier: parameter names are not unique")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    missing = [i for i, p in enumerate(params) if p.requires_grad and p not in by_param]
    if missing:
        raise ValueError(f"CrossBarrier: {len(missing)} optimizer parameters (positions {missing[:5]}) are not "
                         "parameters of the model; pass named_parameters= covering all of them")
    return {p: by_param.get(p, f"param.{i}") for i, p in enumerate(params)}


# BytePS's cross_barrier module carries these too, so that
# `import byteps_native.torch.cross_barrier as bps` is a drop-in for
# `import byteps.torch.cross_barrier as bps`.
from byteps_native.torch.engine import init, local_rank, local_size, rank, shutdown, size  # noqa: E402,F401
from byteps_native.torch.functions import broadcast_optimizer_state, broadcast_parameters  # noqa: E402,F401
from byteps_native.torch.ops import poll, synchronize  # noqa: E402,F401
