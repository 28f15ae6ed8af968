"""Messages between separate processes, byte for byte with their sequence
numbers: Python to Python both ways, Python to C (crs-cat) and back, and
claims that commit, commit shorter, or abort."""
import json
import subprocess
import threading

import pytest

import crs
from conftest import HANG_LIMIT
from peer import digest_of, payload

SIZES = [0, 1, 7, 8, 31, 32, 100, 4096, 65536, 1000]


def expected(count, sizes):
    return digest_of((s, payload(s, sizes[s % len(sizes)]))
                     for s in range(count))


def test_python_to_python_subscriber_process(peer):
    count = 3000
    sub = peer("sub", "p2p")
    with crs.Publisher("p2p") as pub:
        assert pub.wait_subscribers(1, HANG_LIMIT)
        assert sub.readline() == "subscribed"
        for seq in range(count):
            data = payload(seq, SIZES[seq % len(SIZES)])
            if seq % 3 == 0:
                with pub.claim(len(data)) as buf:
                    buf[:] = data
            else:
                pub.offer(data)
        pub.complete()
        got = json.loads(sub.finish().splitlines()[-1])
    assert got == {"count": count, "first": 0, "last": count - 1,
                   "digest": expected(count, SIZES)}


def test_python_publisher_process_to_python(peer):
    count = 2000
    pub = peer("pub", "p2p-back", count, ",".join(map(str, SIZES)))
    seen = []
    with crs.Subscriber("p2p-back", wait=HANG_LIMIT) as sub:
        for msg in sub:
            seen.append((msg.seq, bytes(msg)))
        assert sub.end == (0, "")
    pub.finish()
    assert [s for s, _ in seen] == list(range(count))
    assert digest_of(seen) == expected(count, SIZES)


def test_python_to_c_subscriber(crs_cat, tmp_path):
    lines = [f"{seq} " + payload(seq, seq % 200).hex() for seq in range(5000)]
    out = tmp_path / "out"
    with open(out, "wb") as f:
        cat = subprocess.Popen([crs_cat, "-C", "to-c", "-W"], stdout=f)
    try:
        with crs.Publisher("to-c") as pub:
            assert pub.wait_subscribers(1, HANG_LIMIT)
            for line in lines:
                pub.offer(line.encode())
            pub.complete()
            assert cat.wait(HANG_LIMIT) == 0
    finally:
        if cat.poll() is None:
            cat.kill()
        cat.wait()
    assert out.read_text().splitlines() == lines


def test_c_publisher_to_python(crs_cat):
    data = b"".join(payload(s, 4096) for s in range(256))
    cat = subprocess.Popen([crs_cat, "-P", "from-c", "-b", "4096", "-w", "1"],
                           stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with crs.Subscriber("from-c", wait=HANG_LIMIT) as sub:
            def feed():  # on a thread: crs-cat reads as we consume
                cat.stdin.write(data)
                cat.stdin.close()
            writer = threading.Thread(target=feed)
            writer.start()
            got = [(m.seq, bytes(m)) for m in sub]
            writer.join()
        assert cat.wait(HANG_LIMIT) == 0
    finally:
        if cat.poll() is None:
            cat.kill()
        cat.wait()
    assert [s for s, _ in got] == list(range(256))
    assert b"".join(b for _, b in got) == data


def test_claim_commit_shorter_and_abort(local_pair):
    pub, sub = local_pair("claims")
    with pub.claim(100) as buf:
        assert len(buf) == 100
        buf[:5] = b"first"
        buf.commit(5)
    with pytest.raises(RuntimeError):
        with pub.claim(10) as buf:
            buf[:] = b"abortabort"
            raise RuntimeError("the block fails")
    with pub.claim(6) as buf:
        memoryview(buf)[:] = b"second"
    with pub.claim(0):
        pass
    got = []
    for _ in range(3):
        m = sub.poll(timeout=HANG_LIMIT)
        got.append((m.seq, bytes(m)))
    assert sub.poll() is None
    assert got == [(0, b"first"), (1, b"second"), (2, b"")]
    assert pub.claim(8, timeout=0).commit(3) is None
    m = sub.poll(HANG_LIMIT)
    assert (m.seq, len(m)) == (3, 3)


def test_claim_buffer_is_dead_after_commit(local_pair):
    pub, _ = local_pair("claim-dead")
    c = pub.claim(8)
    c.commit()
    with pytest.raises(ValueError):
        memoryview(c)
    with pytest.raises(ValueError):
        c.commit()
    with pytest.raises(ValueError):
        c[0] = 1


def test_serve_counts_subscribers(local_pair):
    # serve() is the publisher's control work (poll() was its old name,
    # which read like Subscriber.poll); it returns the active subscribers.
    pub, sub = local_pair("serve")
    assert not hasattr(pub, "poll")
    assert pub.serve() == 1
    assert pub.serve() == pub.subscribers == 1
