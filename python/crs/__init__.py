"""crs: cross-process reactive streams over shared memory, from Python.

A :class:`Publisher` creates a named stream; :class:`Subscriber` objects in
other processes (Python or C) open it by name. Messages travel through a
shared-memory ring without copies: ``with pub.claim(n) as buf`` writes in
place, and each received :class:`Message` is a read-only view of the ring
(``memoryview(msg)``, ``numpy.frombuffer(msg, dtype)``). Demand flows back
as Reactive Streams ``request(n)``. Blocking calls release the GIL and
Ctrl-C interrupts them; ``async for`` and ``await pub.wait()`` run on an
asyncio event loop through the library's pollable descriptor.

A message stays valid until the subscriber's next poll, ``msg.release()``
or ``close()``; reading it later raises :class:`StaleMessageError`, and a
poll while a memoryview or array still shows the previous message raises
``BufferError`` rather than let it see reused ring space. Library errors
are ``OSError`` with the errno value (crs's own codes: :class:`Error` and
its subclasses); a stream that ends with an error raises
:class:`StreamError` (``.code``, ``.message``).
"""

import dataclasses
import enum
import sys
from typing import List, Optional

from . import _crs
from ._crs import (  # noqa: F401
    EBASE, EEND, EGAP, ELAST, ENODEMAND, ENOROOM, EPROTO, EVERSION, NAME_MAX,
    ERRMSG_MAX, UNBOUNDED, Claim, Message, name_check, runtime_dir, strerror,
)
from ._errors import (  # noqa: F401
    EndedError, Error, GapError, NoDemandError, NoRoomError, ProtocolError,
    StaleMessageError, StreamError, VersionError,
)

__version__ = f"{_crs.VERSION_MAJOR}.{_crs.VERSION_MINOR}.0"


class Mode(enum.IntEnum):
    """Stream modes (``enum crs_mode``)."""
    PUBLISH = 0  # lockstep: emit the minimum demand of all subscribers
    REPLAY = 1   # run ahead of demand; late joiners get retained messages


class Overflow(enum.IntEnum):
    """What :meth:`Publisher.offer` does without demand or room."""
    BLOCK = 0   # wait (the default)
    ERROR = 1   # fail, and end the stream with ENOBUFS
    DROP = 2    # discard the new message, count it
    LATEST = 3  # keep only the newest unsent message


class Disconnect(enum.IntEnum):
    """What subscribers get when the publisher disconnects."""
    SEND_ERROR = 0      # StreamError(ECANCELED) (the default)
    NO_EVENT = 1        # nothing more
    SEND_COMPLETED = 2  # completion


def _aio():
    """crs.aio if something imported it (asyncio is not loaded otherwise)."""
    return sys.modules.get(__name__ + ".aio")


class Publisher(_crs.Publisher):
    """Publisher(name, *, mode='publish', ring_bytes=1 MiB, max_message=0,
    max_subscribers=64, overflow='block', on_disconnect='error',
    auto_connect=0, replay_count=0, replay_bytes=0, replay_age_ms=0,
    untethered_ms=0, spin_us=0, allow_uid_any=False, allow_gid=None,
    allow_uids=(), max_per_process=0, max_per_uid=0)

    Create stream ``name`` (``crs_pub_create``; the options are those of
    ``struct crs_pub_opts``). ``mode``, ``overflow`` and ``on_disconnect``
    take the enums above or their names ('publish'/'replay';
    'block'/'error'/'drop'/'latest'; 'error'/'none'/'complete').
    ``auto_connect=None`` connects only on :meth:`connect`. Raises
    ``FileExistsError`` if a live publisher owns the name.

    A context manager: leaving the block closes the stream, which ends it
    with EPIPE for subscribers unless it was completed first.
    """

    __slots__ = ()

    async def wait(self, size: int = 0, timeout: Optional[float] = None) -> bool:
        """Wait on the running asyncio loop until a claim of ``size`` bytes
        would succeed (demand and room), serving subscribers meanwhile.
        Returns False on timeout."""
        from . import aio
        return await aio.publisher_wait(self, size, timeout)

    async def send(self, data, timeout: Optional[float] = None) -> None:
        """Offer a copy of ``data`` once there is demand and room, waiting
        on the running asyncio loop. Raises ``TimeoutError`` after
        ``timeout`` seconds."""
        from . import aio
        await aio.publisher_send(self, data, timeout)

    def close(self) -> None:
        """Close the stream (subscribers of an unterminated one get EPIPE)
        and wake tasks awaiting it. Idempotent."""
        super().close()
        aio = _aio()
        if aio:
            aio.wake(self)

    def __exit__(self, *exc) -> bool:
        self.close()
        return False


class Subscriber(_crs.Subscriber):
    """Subscriber(name, *, prefetch=1048576, wait=0, handshake_timeout=None,
    spin_us=0)

    Subscribe to stream ``name``. ``prefetch`` messages are requested up
    front and replenished at 75% (0: call :meth:`request` yourself).
    ``wait`` is how long to wait for the stream to appear, in seconds
    (None: forever; 0: ``FileNotFoundError`` at once).

    Iterate (``for msg in sub``, blocking) or :meth:`poll`; ``async for``
    on an asyncio loop. Iteration stops when the stream completes (or
    after :meth:`cancel`); a stream that fails raises :class:`StreamError`.
    A context manager: leaving the block closes the subscription.
    """

    __slots__ = ()

    def __aiter__(self):
        return self

    async def __anext__(self) -> Message:
        from . import aio
        return await aio.next_message(self)

    def cancel(self) -> None:
        """Stop receiving, release the pressure on the publisher at once,
        and end iteration (also of a task awaiting it). Idempotent."""
        super().cancel()
        aio = _aio()
        if aio:
            aio.wake(self)

    def close(self) -> None:
        """Cancel at once (the mapping goes once no message view uses it)
        and wake tasks awaiting it. Idempotent."""
        super().close()
        aio = _aio()
        if aio:
            aio.wake(self)

    def __exit__(self, *exc) -> bool:
        self.close()
        return False


@dataclasses.dataclass(frozen=True)
class SubscriberInfo:
    """One subscriber of a stream, as the publisher last saw it."""
    slot: int
    pid: int
    requested: int      # total demand, UNBOUNDED if unbounded
    outstanding: int    # demand not yet met
    consumed: int       # the next sequence number it will read
    joined: int         # sequence number of its first message
    lag_messages: int   # published but not yet consumed
    lag_bytes: int
    wakeups: int
    paced: int          # waits for the publisher to get ahead
    holding_back: bool  # it limits the publisher now


@dataclasses.dataclass(frozen=True)
class StreamInfo:
    """A stream's figures (what crs-top shows); see include/crs/inspect.h.

    ``state`` is 'live', 'completed', 'failed', 'closed', 'dead',
    'denied' or 'unresponsive'; for the last three (a publisher that
    died, another user's stream, a publisher that did not answer the
    inspector within 2 s) only ``name`` and ``state`` are known."""
    name: str
    state: str
    pub_pid: int = 0
    mode: str = "publish"
    ring_size: int = 0
    max_message: int = 0
    subscriber_count: int = 0
    published: int = 0
    bytes: int = 0
    dropped: int = 0
    ring_used: int = 0
    wakes: int = 0
    no_demand: int = 0
    no_room: int = 0
    evicted: int = 0
    refused: int = 0
    epoch: int = 0
    retained: int = 0
    retained_bytes: int = 0
    retained_age_ns: int = -1
    end_code: int = 0
    end_message: str = ""
    sampled_ns: int = 0
    subscribers: List[SubscriberInfo] = dataclasses.field(default_factory=list)


def stream(name: str) -> StreamInfo:
    """A snapshot of stream ``name``. Raises ``FileNotFoundError`` if there
    is none, ``ConnectionRefusedError`` if its publisher died,
    ``PermissionError`` for another user's."""
    info, subs = _crs.inspect(name)
    return StreamInfo(**info, subscribers=[SubscriberInfo(**s) for s in subs])


def streams() -> List[StreamInfo]:
    """Every stream in the runtime directory, sorted by name."""
    out = []
    for name in _crs.stream_names():
        try:
            out.append(stream(name))
        except FileNotFoundError:
            continue  # gone meanwhile
        except ConnectionRefusedError:
            out.append(StreamInfo(name=name, state="dead"))
        except PermissionError:
            out.append(StreamInfo(name=name, state="denied"))
        except TimeoutError:
            out.append(StreamInfo(name=name, state="unresponsive"))
    return out


__all__ = [
    "Publisher", "Subscriber", "Message", "Claim", "Mode", "Overflow",
    "Disconnect", "StreamInfo", "SubscriberInfo", "stream", "streams",
    "Error", "NoDemandError", "NoRoomError", "EndedError", "ProtocolError",
    "VersionError", "GapError", "StreamError", "StaleMessageError", "UNBOUNDED",
    "strerror", "runtime_dir", "name_check",
]
