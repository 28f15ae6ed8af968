"""Zero copy and safe lifetimes: a received array lies in the shared ring
mapping itself; a released message raises instead of showing reused ring
space; a poll while a view still shows the previous message is refused;
close() cancels at once but unmaps only after the last view; a message
keeps its subscriber alive."""
import gc
import weakref

import numpy as np
import pytest

import crs
from conftest import HANG_LIMIT


def mapping_of(addr):
    """The /proc/self/maps line whose range holds addr, split."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= addr < hi:
                return line.split()
    return None


def test_numpy_array_is_the_ring_itself(peer):
    # the publisher is another process: the bytes can only be shared memory
    pub = peer("pub", "zc", 4, "4096")
    with crs.Subscriber("zc", wait=HANG_LIMIT) as sub:
        msg = next(sub)
        arr = np.frombuffer(msg, dtype=np.uint8)
        addr = arr.__array_interface__["data"][0]
        fields = mapping_of(addr)
        # a read-only shared mapping of the publisher's memfd, not the heap
        assert fields is not None
        assert fields[1].startswith("r-") and fields[1].endswith("s")
        assert "memfd:" in " ".join(fields[5:])
        assert not arr.flags.writeable
        view = memoryview(msg)
        assert np.shares_memory(arr, np.frombuffer(view, dtype=np.uint8))
        assert bytes(arr) == bytes(view) and len(arr) == len(msg) == 4096
        view.release()
        del arr
        msg2 = next(sub)
        addr2 = np.frombuffer(msg2, np.uint8).__array_interface__["data"][0]
        # the next message follows in the same ring: 8-byte frame header
        assert mapping_of(addr2)[0] == fields[0]
        assert addr2 == addr + 4096 + 8
        sub.cancel()
    pub.kill()


def test_message_after_release_raises(local_pair):
    pub, sub = local_pair("stale")
    for i in range(3):
        pub.offer(bytes([i]) * 16)
    m0 = sub.poll(HANG_LIMIT)
    assert m0.valid and bytes(m0) == b"\0" * 16
    m1 = sub.poll(HANG_LIMIT)  # releases m0
    assert not m0.valid
    for use in (bytes, memoryview, lambda m: np.frombuffer(m, np.uint8),
                lambda m: m.tobytes()):
        with pytest.raises(crs.StaleMessageError):
            use(m0)
    assert m0.seq == 0 and len(m0) == 16  # metadata stays readable
    m1.release()
    with pytest.raises(crs.StaleMessageError):
        bytes(m1)
    with sub.poll(HANG_LIMIT) as m2:
        assert bytes(m2) == b"\2" * 16
    with pytest.raises(crs.StaleMessageError):
        bytes(m2)


def test_poll_refused_while_a_view_shows_the_message(local_pair):
    pub, sub = local_pair("held")
    pub.offer(b"A" * 64)
    pub.offer(b"B" * 64)
    msg = sub.poll(HANG_LIMIT)
    arr = np.frombuffer(msg, np.uint8)
    view = memoryview(msg)
    with pytest.raises(BufferError):
        sub.poll()
    with pytest.raises(BufferError):
        msg.release()
    view.release()  # the array still holds it
    with pytest.raises(BufferError):
        next(sub)
    assert bytes(arr) == b"A" * 64  # untouched: its space was never reused
    del arr
    assert bytes(sub.poll(HANG_LIMIT)) == b"B" * 64


def test_close_unmaps_only_after_the_last_view(local_pair):
    pub, sub = local_pair("close-late")
    pub.offer(b"kept" * 256)
    msg = sub.poll(HANG_LIMIT)
    arr = np.frombuffer(msg, np.uint8)
    addr = arr.__array_interface__["data"][0]
    ring = mapping_of(addr)
    sub.close()  # cancels now
    assert sub.closed
    assert pub.wait_demand(8, 0) is False  # no demand: it has gone
    with pytest.raises(crs.StaleMessageError):
        bytes(msg)
    assert bytes(arr[:8]) == b"keptkept"  # still mapped, no crash
    assert mapping_of(addr) == ring
    del arr
    gc.collect()
    assert mapping_of(addr) != ring  # the subscriber's mapping went


def test_message_keeps_its_subscriber_alive(local_pair):
    pub, sub = local_pair("alive")
    pub.offer(b"x" * 8)
    msg = sub.poll(HANG_LIMIT)
    ref = weakref.ref(sub)
    local_pair_sub = sub
    del sub
    # the fixture and our name still hold it; drop ours and the message
    # must be what keeps it open
    assert ref() is local_pair_sub
    del local_pair_sub
    assert bytes(msg) == b"x" * 8


def test_subscriber_freed_with_its_last_message(crs_dir):
    from conftest import open_sub
    pub = crs.Publisher("freed")
    sub = open_sub(pub, "freed")
    pub.offer(b"y" * 8)
    msg = sub.poll(HANG_LIMIT)
    ref = weakref.ref(sub)
    del sub
    assert ref() is not None and bytes(msg) == b"y" * 8
    del msg
    gc.collect()
    assert ref() is None
    assert pub.wait_subscribers(1, 0) is False  # it left the stream
    pub.close()


def test_publisher_close_with_a_live_claim_view(local_pair):
    pub, sub = local_pair("pub-close")
    claim = pub.claim(64)
    arr = np.frombuffer(claim, np.uint8)
    arr[:] = 7
    pub.close()  # aborts the claim; the ring stays mapped for arr
    assert arr.sum() == 7 * 64
    with pytest.raises(crs.StreamError) as e:
        sub.poll(HANG_LIMIT)
    assert e.value.code == 32  # EPIPE: closed without completing
    del arr, claim
