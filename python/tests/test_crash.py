"""Processes that die or get interrupted: a SIGKILLed publisher ends the
Python subscriber's stream with EPIPE after the messages it committed
(never a hang), and SIGINT (Ctrl-C) interrupts a blocked offer() or a
blocked iteration with KeyboardInterrupt."""
import errno
import signal
import time

import pytest

import crs
from conftest import HANG_LIMIT
from peer import payload


def test_killed_publisher_gives_epipe(peer):
    pub = peer("hang", "victim", 50)
    with crs.Subscriber("victim", wait=HANG_LIMIT) as sub:
        got = [bytes(sub.poll(HANG_LIMIT)) for _ in range(50)]
        assert got == [payload(s, 64) for s in range(50)]
        assert pub.readline() == "hanging"
        pub.proc.send_signal(signal.SIGKILL)
        pub.proc.wait(HANG_LIMIT)
        # the poll must end with the error, not wait forever (None would
        # mean HANG_LIMIT seconds passed without an end)
        with pytest.raises(crs.StreamError) as e:
            assert sub.poll(HANG_LIMIT) is None, "no end after SIGKILL"
        assert e.value.code == errno.EPIPE


def test_killed_publisher_wakes_blocked_iteration(peer):
    pub = peer("hang", "victim2", 0)
    with crs.Subscriber("victim2", wait=HANG_LIMIT) as sub:
        assert pub.readline() == "hanging"
        pub.proc.kill()
        with pytest.raises(crs.StreamError) as e:
            for _ in sub:
                pass
        assert e.value.code == errno.EPIPE


def wait_asleep(pid):
    """Until the process sleeps in the kernel (inside the blocking call)."""
    deadline = time.monotonic() + HANG_LIMIT
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                return
        time.sleep(0.01)
    raise AssertionError("the peer never went to sleep")


@pytest.mark.parametrize("role,name", [("block-offer", "int-pub"),
                                       ("block-next", "int-sub")])
def test_ctrl_c_interrupts_a_blocking_call(peer, role, name):
    holder = None
    if role == "block-next":  # a silent stream for it to wait on
        holder = crs.Publisher(name)
    p = peer(role, name)
    if holder:
        while not holder.wait_subscribers(1, 0.1):
            assert p.proc.poll() is None, p.proc.stderr.read().decode()
    assert p.readline() == "blocking"
    wait_asleep(p.proc.pid)
    p.proc.send_signal(signal.SIGINT)
    _, err = p.proc.communicate(timeout=HANG_LIMIT)
    assert p.proc.returncode != 0
    assert b"KeyboardInterrupt" in err
    if holder:
        holder.close()
