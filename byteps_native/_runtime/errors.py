"""The errors every layer raises, defined once at the bottom so that a lower
layer never imports a higher one to raise them (torch's ops used to import
HorovodInternalError from its collectives, TF defined its own copy)."""


class EngineError(RuntimeError):
    """A bps_* call failed; the message is the engine's own."""


class HorovodInternalError(RuntimeError):
    """A collective failed (a peer died or the engine stopped). Elastic jobs
    catch it to restore their last commit (Horovod's name and meaning)."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod raises it when hosts join or leave; torchrun restarts instead."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
