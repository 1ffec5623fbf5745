"""No process outlives the copy that started it.

The questions start nothing that outlives them (the probe, and the plans and lengths computed in the
training interpreter, are short-lived children that die with copier: ``die_with_parent``). After
rendering, the post-generation task launches the smoke's trainer in a session of its own (so a timeout
can stop its whole process group): not a child that copier knows about, and a terminal's Ctrl-C does
not reach a process in another session. So the task follows an *owner*: copier's process. When copier
loads our Jinja extension it records its pid in ``MSMM_OWNER_PID`` (``hooks.render.copier_ext``); every
process of the copy inherits that variable, and each long-lived one watches the owner
(``follow_owner``): once the owner is gone, however it ended (a bad answer, a probe error, Ctrl-C,
``kill -9``), the process stops the groups it launched and exits within a second. Outside copier
(``python -m hooks.smoke`` run by hand) there is no owner and nothing is followed.

The variable also marks every process of a copy, which is how the tests find stragglers. This module
uses the standard library only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

OWNER_ENV = "MSMM_OWNER_PID"
POLL_S = 0.25
_GROUPS: set[int] = set()  # process groups this process launched and must stop if the owner goes


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process: not gone, and on Linux not an exited, unreaped child."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def owner_pid() -> int | None:
    """The owner recorded in the environment, unless that is this very process."""
    try:
        pid = int(os.environ.get(OWNER_ENV, ""))
    except ValueError:
        return None
    return pid if pid != os.getpid() else None


def owner_gone() -> bool:
    """True when this process has an owner and it has exited."""
    pid = owner_pid()
    return pid is not None and not pid_alive(pid)


def launched_group(pgid: int) -> None:
    """Record a process group (a launch in a session of its own) to stop if the owner goes."""
    _GROUPS.add(pgid)


def finished_group(pgid: int) -> None:
    _GROUPS.discard(pgid)


def kill_groups() -> None:
    """SIGKILL every recorded group: the owner is gone, nobody waits for their results."""
    for pgid in list(_GROUPS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
        _GROUPS.discard(pgid)


def follow_owner(on_gone: Callable[[], None] | None = None) -> bool:
    """Watch the owner from a daemon thread; when it exits, stop our groups, run ``on_gone``, exit 1.

    False when there is no owner to follow. Exiting with ``os._exit`` skips interpreter teardown,
    which a process that lost its owner has no use for (and which can block on a dead peer).
    """
    pid = owner_pid()
    if pid is None:
        return False

    def watch() -> None:
        while pid_alive(pid):
            time.sleep(POLL_S)
        kill_groups()
        if on_gone is not None:
            on_gone()
        sys.stderr.flush()
        os._exit(1)

    threading.Thread(target=watch, name="msmm-follow-owner", daemon=True).start()
    return True


def die_with_parent() -> None:
    """``preexec_fn`` for short-lived children: the kernel ends them when their parent ends (Linux).

    Elsewhere a no-op: such children finish on their own within their timeouts.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
