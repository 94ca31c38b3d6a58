"""Shared-memory segments whose creator is gone.

Local rank 0 of a machine creates its segments
(/dev/shm/bpsn-<job>-m<machine>-p<pid>-ctl and -arena) and unlinks them once
every local rank has mapped them. Killed in between, it cannot: the
survivors of its machine remove them as they fail (issue 30). A rank that
had mapped them does so in C++ (LocalSharedMemory's destructor); this is for
one that failed before it could map them, and runs when init fails and when
the process exits.
"""
import os
import re

_SEGMENT = re.compile(r"^bpsn-(?P<job>.+)-m\d+-p(?P<pid>\d+)-(ctl|arena)$")


def remove_orphaned_segments(job_id=None, shm_dir="/dev/shm"):
    """Unlinks segments (of `job_id`, or of any job) whose creator exited; returns their names."""
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    removed = []
    for name in names:
        m = _SEGMENT.match(name)
        if not m or (job_id and m["job"] != job_id) or _alive(int(m["pid"])):
            continue
        try:
            os.unlink(os.path.join(shm_dir, name))
            removed.append(name)
        except OSError:
            pass
    return removed


def _alive(pid):
    """Like csrc/common/process_alive.cc: a zombie its launcher has not reaped is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")
