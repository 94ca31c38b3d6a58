"""The environment, read in one place into typed values.

Each variable the Python faces read is parsed here, once per call site's
need, by the same rules the engine applies (csrc/common/config.cc), so a
value means the same to every face and to the engine: a boolean is 1/0 or
true/false (any case the engine accepts), and anything else is an error that
names the variable, before a job starts with a setting nobody meant.
docs/env.md documents every variable.
"""
import datetime
import os

_TRUE = ("1", "true", "True", "TRUE")
_FALSE = ("0", "false", "False", "FALSE")
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def flag(name, default=False):
    """A boolean variable by the engine's rule (unset or empty: `default`)."""
    text = os.environ.get(name, "")
    if text == "":
        return default
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name}='{text}' is not a boolean (use 0 or 1)")


def number(name, default):
    """A float variable (unset or empty: `default`)."""
    text = os.environ.get(name, "")
    if text == "":
        return float(default)
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name}='{text}' must be a number") from None


def integer(name, default):
    """An integer variable (unset or empty: `default`)."""
    text = os.environ.get(name, "")
    if text == "":
        return int(default)
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}='{text}' must be an integer") from None


def asynchronous():
    """BYTEPS_ENABLE_ASYNC: the servers apply each push at once (BytePS's async training)."""
    return flag("BYTEPS_ENABLE_ASYNC")


DEFAULT_FUSION_BYTES = 32 << 20  # csrc/common/config.h: Config::kDefaultFusionBytes


def fusion_bytes():
    """BYTEPS_FUSION_BYTES (BYTEPS_TF_FUSION_BYTES, its name before the engine
    fused, is an alias; the engine's name wins): the most bytes of one fused
    bucket of a group submission (csrc/core/fused_group.h); 0: no fusion."""
    value = integer("BYTEPS_TF_FUSION_BYTES", DEFAULT_FUSION_BYTES)
    name = "BYTEPS_TF_FUSION_BYTES"
    if os.environ.get("BYTEPS_FUSION_BYTES", ""):
        value, name = integer("BYTEPS_FUSION_BYTES", DEFAULT_FUSION_BYTES), "BYTEPS_FUSION_BYTES"
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (0 disables fusion), got {value}")
    return value


def rendezvous_timeout():
    """BYTEPS_RENDEZVOUS_TIMEOUT (seconds, default 300) as a timedelta, for c10d stores."""
    return datetime.timedelta(seconds=number("BYTEPS_RENDEZVOUS_TIMEOUT", 300))


def timeout_s():
    """BYTEPS_TIMEOUT: seconds without progress before the engine gives up (default 300)."""
    return number("BYTEPS_TIMEOUT", 300)


def role():
    """DMLC_ROLE as bpslaunch sets it ('worker', 'server', 'scheduler'), or '' outside bpslaunch."""
    return os.environ.get("DMLC_ROLE", "")


def launched_by_torchrun():
    """True when torchrun (or a torch.distributed-style launcher) announced a job."""
    return all(k in os.environ for k in TORCHRUN_VARIABLES)


def restart_count():
    """TORCHELASTIC_RESTART_COUNT: which attempt of a torchrun job this is (0 first)."""
    return integer("TORCHELASTIC_RESTART_COUNT", 0)


def dedicated_servers():
    """DMLC_NUM_SERVER: servers started apart from the workers (0: colocated)."""
    return integer("DMLC_NUM_SERVER", 0)


def job_id():
    """BYTEPS_JOB_ID, or None: names this job's shared-memory segments."""
    return os.environ.get("BYTEPS_JOB_ID")
