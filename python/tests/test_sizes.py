"""Property tests: every message size from 0 to max_message arrives byte
for byte, by offer and by claim, and one byte more is EMSGSIZE."""
import errno

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import crs
from conftest import HANG_LIMIT, open_sub

# One process plays both sides, so the subscriber reports its position
# only as it reads (every quarter ring): a ring well above four of the
# largest messages keeps the publisher from ever waiting on that.
RING = 1 << 20
MAX = 1 << 14  # max_message


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("sizes")
    (d / "run").mkdir(mode=0o700)
    mp = pytest.MonkeyPatch()
    mp.setenv("CRS_DIR", str(d / "run"))
    pub = crs.Publisher("sizes", ring_bytes=RING, max_message=MAX)
    sub = open_sub(pub, "sizes")
    yield pub, sub
    sub.close()
    pub.close()
    mp.undo()


def pattern(size, seed):
    """size bytes, cheap to make, different for each seed."""
    block = bytes((seed + i) % 256 for i in range(256))
    return (block * (size // 256 + 1))[:size]


messages = st.one_of(
    st.binary(max_size=300),  # arbitrary contents, small
    st.builds(pattern, st.one_of(st.integers(0, MAX),
                                 st.integers(MAX - 64, MAX)),
              st.integers(0, 255)))


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=messages, by_claim=st.booleans())
@example(data=b"", by_claim=True)
@example(data=b"", by_claim=False)
@example(data=pattern(MAX, 1), by_claim=True)
@example(data=pattern(MAX, 2), by_claim=False)
def test_any_size_arrives_exactly(pair, data, by_claim):
    pub, sub = pair
    if by_claim:
        with pub.claim(len(data), timeout=HANG_LIMIT) as buf:
            if data:
                buf[:] = data
    else:
        pub.offer(data, HANG_LIMIT)
    msg = sub.poll(HANG_LIMIT)
    assert len(msg) == len(data)
    assert bytes(msg) == data
    assert memoryview(msg).readonly


def test_one_byte_too_many(pair):
    pub, _ = pair
    for call in (lambda: pub.offer(bytes(MAX + 1)),
                 lambda: pub.claim(MAX + 1)):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EMSGSIZE
