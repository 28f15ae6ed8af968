"""asyncio: one event loop, no thread, serving several streams at once
(three publisher processes read with `async for`, a publisher that awaits
demand with `await pub.wait()` feeding a subscriber process) beside an
ordinary socket, on both crs wait engines."""
import asyncio
import json
import socket

import pytest

import crs
import crs.aio
from conftest import HANG_LIMIT
from peer import digest_of, payload

SIZES = [1, 64, 4096, 0, 300]


@pytest.fixture(params=["io_uring", "poll"])
def engine(request, monkeypatch):
    if request.param == "poll":
        monkeypatch.setenv("CRS_NO_URING", "1")
    return request.param


async def read_stream(name, count):
    got = []
    with crs.Subscriber(name, wait=HANG_LIMIT) as sub:
        async for msg in sub:
            got.append((msg.seq, bytes(msg)))
    assert len(got) == count
    return digest_of(got)


async def feed(name, count):
    with crs.Publisher(name) as pub:
        for seq in range(count):
            data = payload(seq, SIZES[seq % len(SIZES)])
            if seq % 2:
                await pub.send(data)
            else:
                assert await pub.wait(len(data))
                with pub.claim(len(data), timeout=0) as buf:
                    buf[:] = data
        pub.complete()
        while not pub.wait_consumed(0):
            await asyncio.sleep(0.001)


async def echo_socket(rounds):
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_connection(sock=a)
    rb, wb = await asyncio.open_connection(sock=b)
    for i in range(rounds):
        wa.write(b"%d\n" % i)
        line = await rb.readline()
        wb.write(line)
        assert await ra.readline() == b"%d\n" % i
    for w in (wa, wb):
        w.close()
    return rounds


def expected(count):
    return digest_of((s, payload(s, SIZES[s % len(SIZES)]))
                     for s in range(count))


@pytest.mark.asyncio
async def test_many_streams_one_loop(peer, engine):
    counts = {"aio-a": 500, "aio-b": 1500, "aio-c": 50}
    for name, n in counts.items():
        peer("pub", name, n, ",".join(map(str, SIZES)))
    out = peer("sub", "aio-out")
    reactor = crs.aio._reactor()
    assert reactor.loop.engine == engine
    # Both engines give the loop a pollable descriptor (io_uring's, or an
    # eventfd on the fallback): asyncio waits on it in its selector.
    assert reactor.fd >= 0
    readers = [read_stream(name, n) for name, n in counts.items()]
    results = await asyncio.wait_for(
        asyncio.gather(*readers, feed("aio-out", 800), echo_socket(200)),
        HANG_LIMIT)
    for (name, n), digest in zip(counts.items(), results):
        assert digest == expected(n), name
    got = json.loads(out.finish().splitlines()[-1])
    assert got == {"count": 800, "first": 0, "last": 799,
                   "digest": expected(800)}


@pytest.mark.asyncio
async def test_wait_times_out_and_cancel_ends_iteration(engine):
    from conftest import open_sub
    with crs.Publisher("aio-idle") as pub:
        assert await pub.wait(8, timeout=0.05) is False  # nobody asked
        sub = open_sub(pub, "aio-idle", prefetch=0)

        async def consume():
            return [m async for m in sub]

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        assert not task.done()
        sub.cancel()
        assert await asyncio.wait_for(task, HANG_LIMIT) == []
        sub.close()


@pytest.mark.asyncio
async def test_closing_a_subscriber_ends_the_task_awaiting_it(engine):
    from conftest import open_sub
    with crs.Publisher("aio-close") as pub:
        sub = open_sub(pub, "aio-close")

        async def consume():
            return [m async for m in sub]

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        with sub:
            pass  # leaving the block closes it
        assert await asyncio.wait_for(task, HANG_LIMIT) == []
