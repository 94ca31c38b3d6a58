"""Training progress as plain lines: throughput and an ETA that read the same
in a terminal and in `kubectl logs` / Slurm output files (no carriage returns,
no bars), at most one line per BYTEPS_PROGRESS_INTERVAL seconds (default 10)
plus one per epoch.

    epoch 2/15 step 30/45 | 1843 samples/s | loss 0.412 | elapsed 0:00:21 | ETA 0:02:31
"""
import datetime
import os
import time


def _clock(seconds):
    return str(datetime.timedelta(seconds=int(max(0, seconds))))


class Progress:
    """`samples_per_step` is global (all processes); only `enabled` (rank 0) prints."""

    def __init__(self, epochs, steps_per_epoch, samples_per_step, enabled=True, interval=None):
        self.epochs = epochs
        self.steps_per_epoch = max(1, steps_per_epoch)
        self.samples_per_step = samples_per_step
        self.enabled = enabled
        self.interval = float(os.environ.get("BYTEPS_PROGRESS_INTERVAL", "10") if interval is None else interval)
        self.start = time.monotonic()
        self.last_print = self.start
        self.steps_done = 0
        self.epoch = 0

    def step(self, epoch, step_in_epoch, loss=None):
        """Call after each step; `epoch` and `step_in_epoch` count from 0."""
        self.steps_done += 1
        self.epoch = epoch
        now = time.monotonic()
        last_of_epoch = step_in_epoch + 1 == self.steps_per_epoch
        if self.enabled and (last_of_epoch or now - self.last_print >= self.interval):
            self.last_print = now
            print(self.line(epoch, step_in_epoch, loss, now), flush=True)

    def line(self, epoch, step_in_epoch, loss, now):
        elapsed = now - self.start
        rate = self.steps_done / elapsed if elapsed > 0 else 0.0
        remaining = self.epochs * self.steps_per_epoch - (epoch * self.steps_per_epoch + step_in_epoch + 1)
        parts = [f"epoch {epoch + 1}/{self.epochs} step {step_in_epoch + 1}/{self.steps_per_epoch}",
                 f"{rate * self.samples_per_step:.0f} samples/s"]
        if loss is not None:
            parts.append(f"loss {loss:.3f}")
        parts += [f"elapsed {_clock(elapsed)}", f"ETA {_clock(remaining / rate) if rate else '?'}"]
        return " | ".join(parts)
