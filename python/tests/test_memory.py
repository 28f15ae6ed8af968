"""Nothing grows per message: over 100,000 messages from another process,
Python memory (tracemalloc) and the reference counts of the handles stay
flat, through iteration, poll, poll_many and claim/offer."""
import gc
import sys
import tracemalloc

import crs
from conftest import HANG_LIMIT, open_sub

COUNT = 100_000
SLACK = 64 * 1024  # bytes: interpreter noise, far below 100,000 messages


def test_subscriber_memory_is_flat(peer):
    peer("pub", "mem", COUNT, "16,64,200")
    with crs.Subscriber("mem", wait=HANG_LIMIT) as sub:
        total = 0
        tracemalloc.start()
        try:
            it = iter(sub)
            for _ in range(1000):  # warm up: caches, freelists
                total += len(next(it))
            gc.collect()
            base, _ = tracemalloc.get_traced_memory()
            refs = sys.getrefcount(sub)
            n = 1000
            while n < COUNT // 2:
                msg = sub.poll(HANG_LIMIT)
                with memoryview(msg) as v:
                    total += v.nbytes
                n += 1
            while n < COUNT:
                batch = sub.poll_many(256, timeout=HANG_LIMIT)
                n += len(batch)
                total += sum(map(len, batch))
            gc.collect()
            now, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert n == COUNT and sub.last_seq == COUNT - 1
        assert now - base < SLACK, f"grew {now - base} bytes"
        del msg
        assert sys.getrefcount(sub) == refs
        assert list(sub) == []  # completed


def test_publisher_memory_is_flat(peer):
    out = peer("sub", "mem-pub")
    with crs.Publisher("mem-pub") as pub:
        assert pub.wait_subscribers(1, HANG_LIMIT)
        data = b"m" * 48
        tracemalloc.start()
        try:
            for _ in range(1000):
                pub.offer(data)
            gc.collect()
            base, _ = tracemalloc.get_traced_memory()
            refs = sys.getrefcount(pub)
            for i in range(COUNT // 2 - 1000):
                pub.offer(data)
            for i in range(COUNT // 2):
                with pub.claim(48) as buf:
                    buf[:8] = b"claimed!"
            gc.collect()
            now, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert now - base < SLACK, f"grew {now - base} bytes"
        del buf  # the last claim refers to its publisher
        assert sys.getrefcount(pub) == refs
        pub.complete()
        assert '"count": 100000' in out.finish()
