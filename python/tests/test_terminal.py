"""Demand and terminal signals as in C: request(n) bounds delivery,
request(0) and negative counts end the stream with EINVAL, cancel stops
iteration without an error, completion is StopIteration, errors are
StreamError with code and message; every library code maps to an
exception class."""
import errno
import os

import pytest

import crs
from conftest import HANG_LIMIT


def test_demand_bounds_what_the_publisher_may_send(local_pair):
    pub, sub = local_pair("demand", sub_kw={"prefetch": 0})
    with pytest.raises(crs.NoDemandError) as e:
        pub.claim(8, timeout=0)
    assert e.value.errno == crs.ENODEMAND
    assert pub.demand == 0
    sub.request(2)
    assert pub.wait_demand(8, HANG_LIMIT)
    pub.offer(b"one", 0)
    pub.offer(b"two", 0)
    with pytest.raises(crs.NoDemandError):
        pub.offer(b"three", 0)
    assert [bytes(sub.poll(HANG_LIMIT)) for _ in range(2)] == [b"one", b"two"]
    assert sub.poll() is None
    sub.request(crs.UNBOUNDED)
    assert sub.requested == crs.UNBOUNDED
    sub.request(5)  # stays unbounded, never wraps
    assert sub.requested == crs.UNBOUNDED


@pytest.mark.parametrize("n", [0, -1])
def test_request_zero_or_negative_ends_with_einval(local_pair, n):
    pub, sub = local_pair("req0", sub_kw={"prefetch": 0})
    with pytest.raises(OSError) as e:
        sub.request(n)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(crs.StreamError) as e:
        sub.poll(HANG_LIMIT)
    assert e.value.code == errno.EINVAL and e.value.message
    with pytest.raises(crs.StreamError):  # and stays ended
        next(sub)


def test_cancel_stops_iteration_without_error(local_pair):
    pub, sub = local_pair("cancel")
    pub.offer(b"before")
    sub.cancel()
    sub.cancel()  # idempotent
    sub.request(10)  # a no-op after cancel
    assert list(sub) == []
    with pytest.raises(StopIteration):
        sub.poll()
    assert sub.end[0] == errno.ECANCELED
    assert pub.wait_demand(8, 0) is False  # its demand no longer counts


def test_completion_after_the_messages(local_pair):
    pub, sub = local_pair("complete")
    for i in range(5):
        pub.offer(str(i).encode())
    pub.complete()
    assert [bytes(m) for m in sub] == [b"0", b"1", b"2", b"3", b"4"]
    assert sub.end == (0, "")
    with pytest.raises(StopIteration):
        sub.poll()
    with pytest.raises(OSError) as e:  # ESHUTDOWN: already terminated
        pub.complete()
    assert e.value.errno == errno.ESHUTDOWN


def test_error_carries_code_and_message(local_pair):
    pub, sub = local_pair("error")
    pub.offer(b"last")
    pub.error(errno.EIO, "disk on fire")
    assert bytes(next(sub)) == b"last"
    with pytest.raises(crs.StreamError) as e:
        next(sub)
    assert (e.value.code, e.value.message) == (errno.EIO, "disk on fire")
    assert isinstance(e.value, OSError) and e.value.errno == errno.EIO


def test_poll_many_copies_in_order_then_ends(local_pair):
    pub, sub = local_pair("many", sub_kw={"prefetch": 512})
    for i in range(300):
        pub.offer(i.to_bytes(4, "little"))
    pub.complete()
    got = []
    while True:
        try:
            batch = sub.poll_many(128, timeout=HANG_LIMIT)
        except StopIteration:
            break
        assert batch and len(batch) <= 128
        got += batch
        assert sub.last_seq == len(got) - 1
    assert got == [i.to_bytes(4, "little") for i in range(300)]


def test_every_library_code_maps_to_a_class():
    classes = {crs.ENODEMAND: crs.NoDemandError,
               crs.ENOROOM: crs.NoRoomError,
               crs.EEND: crs.EndedError,
               crs.EPROTO: crs.ProtocolError,
               crs.EVERSION: crs.VersionError,
               crs.EGAP: crs.GapError}
    assert sorted(classes) == list(range(crs.EBASE + 1, crs.ELAST))
    for code, cls in classes.items():
        e = crs._crs._error_for(-code)
        assert type(e) is cls and isinstance(e, crs.Error)
        assert e.errno == code and e.strerror == crs.strerror(-code)
    for code, cls in [(errno.ENOENT, FileNotFoundError),
                      (errno.EEXIST, FileExistsError),
                      (errno.ETIMEDOUT, TimeoutError),
                      (errno.EACCES, PermissionError),
                      (errno.EPIPE, BrokenPipeError),
                      (errno.ECONNRESET, ConnectionResetError),
                      (errno.EMSGSIZE, OSError), (errno.EUSERS, OSError)]:
        e = crs._crs._error_for(-code)
        assert isinstance(e, cls) and e.errno == code


def test_real_errors_from_the_library(local_pair):
    with pytest.raises(FileNotFoundError):
        crs.Subscriber("nobody-here")
    pub, _ = local_pair("taken", pub_kw={"ring_bytes": 1 << 16})
    with pytest.raises(FileExistsError) as e:
        crs.Publisher("taken")
    assert str(os.getpid()) in str(e.value)  # crs_errmsg(): who owns it
    with pytest.raises(OSError) as e:
        crs.Publisher("../escape")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        pub.offer(bytes((1 << 16) // 4 + 1))
    assert e.value.errno == errno.EMSGSIZE
    with pytest.raises(ValueError):
        crs.Publisher("x", overflow="sideways")


def test_slot_quota_per_process(crs_dir):
    from conftest import open_sub
    with crs.Publisher("quota", max_per_process=1) as pub:
        first = open_sub(pub, "quota")
        with pytest.raises(OSError) as e:
            open_sub(pub, "quota")
        assert e.value.errno == errno.EDQUOT
        first.close()
