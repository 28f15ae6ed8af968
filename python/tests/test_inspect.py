"""crs.streams(): the inspector's figures for live streams (another
process's publisher, its subscribers, counts), and the state of a stream
whose publisher died."""
import os
import threading

import crs
from conftest import HANG_LIMIT, open_sub


def test_streams_lists_figures(peer):
    pub = peer("hang", "watched", 10)
    with crs.Subscriber("watched", wait=HANG_LIMIT) as sub:
        for _ in range(10):
            sub.poll(HANG_LIMIT)
        assert pub.readline() == "hanging"
        sub.poll()  # releases the last one
        found = {s.name: s for s in crs.streams()}
        s = found["watched"]
        assert s.state == "live"
        assert s.pub_pid == pub.proc.pid
        assert s.published == 10 and s.bytes == 640
        assert s.mode == "publish" and s.ring_size == 1 << 20
        assert s.subscriber_count == 1
        (me,) = s.subscribers
        assert me.pid == os.getpid()
        assert me.requested >= 10
        assert (me.joined, me.consumed) == (0, 10)
        one = crs.stream("watched")
        assert one.name == "watched" and one.published == 10
        pub.proc.kill()
        pub.proc.wait()
    states = {s.name: s.state for s in crs.streams()}
    assert states["watched"] == "dead"


def serving(pub, fn):
    """fn() on a thread while this one serves pub (the inspector asks the
    publisher for the statistics segment)."""
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()))
    t.start()
    while t.is_alive():
        pub.wait_subscribers(1000, 0.02)
    t.join()
    return box["r"]


def test_replay_stream_of_this_process():
    with crs.Publisher("own", mode="replay", replay_count=5) as pub:
        sub = open_sub(pub, "own")
        for i in range(8):
            pub.offer(b"%d" % i)
        s = serving(pub, lambda: crs.stream("own"))
        assert (s.state, s.mode, s.published, s.retained) == \
            ("live", "replay", 8, 5)
        pub.error(71, "protocol trouble")
        s = serving(pub, crs.streams)[0]
        assert (s.name, s.state, s.end_code, s.end_message) == \
            ("own", "failed", 71, "protocol trouble")
        sub.close()
