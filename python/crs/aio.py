"""asyncio for crs: one crs event loop per asyncio loop, no thread.

The crs loop's descriptor (``crs_loop_fd``) sits in asyncio's selector;
when it is readable the loop runs once without blocking. A subscription
joins the crs loop only while a task awaits its next message: a message
that is already there is returned zero-copy by a plain poll, one that
arrives while the task sleeps is delivered by the crs loop, which hands
its ring space back after its callback, so that one comes as a copy
(``msg.copied``). A publisher joins while a task awaits :meth:`wait`, and
the loop admits subscribers meanwhile. The descriptor is io_uring's, or
on the fallback engine (``CRS_NO_URING=1``) an eventfd the library's
watcher thread signals; either way this thread never blocks in crs.
"""

import asyncio
import functools
import weakref
from typing import Dict, List, Optional

from . import _crs
from ._errors import NoDemandError, NoRoomError

_reactors: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _pub_ready(reactor_ref, pub_ref):
    reactor, pub = reactor_ref(), pub_ref()
    if reactor is not None and pub is not None:
        reactor.pub_ready(pub)


class _Reactor:
    def __init__(self, aloop: asyncio.AbstractEventLoop):
        self._aloop = weakref.ref(aloop)
        self.loop = _crs.Loop()
        self.sub_waiters: Dict[object, asyncio.Future] = {}
        self.pub_waiters: Dict[object, List[asyncio.Future]] = {}
        self.fd = self.loop.fileno()
        aloop.add_reader(self.fd, self.run)

    @property
    def aloop(self) -> asyncio.AbstractEventLoop:
        return self._aloop()

    def run(self) -> None:
        """Dispatch what is ready, then wake the tasks it concerns."""
        self.loop.run(0)
        for sub, fut in list(self.sub_waiters.items()):
            pending, ended = sub._loop_state
            if pending or ended or sub.closed:
                self._settle_sub(sub, fut)

    def _settle_sub(self, sub, fut) -> None:
        if self.sub_waiters.get(sub) is fut:
            del self.sub_waiters[sub]
        self.loop.remove(sub)
        if not fut.done():
            fut.set_result(None)

    def wake(self, handle) -> None:
        fut = self.sub_waiters.get(handle)
        if fut is not None:
            self._settle_sub(handle, fut)
        for fut in self.pub_waiters.get(handle, ()):
            if not fut.done():
                fut.set_result(None)

    def pub_ready(self, pub) -> None:
        for fut in self.pub_waiters.get(pub, ()):
            if not fut.done():
                fut.set_result(None)

    async def next_message(self, sub):
        while True:
            if sub.closed:
                raise StopAsyncIteration
            try:
                msg = sub._try_next()
            except StopIteration:
                raise StopAsyncIteration from None
            if msg is not None:
                return msg
            fut = self.aloop.create_future()
            self.sub_waiters[sub] = fut
            self.loop.add_sub(sub)
            try:
                self.run()  # what came meanwhile; arms the descriptor
                await fut
            finally:
                if self.sub_waiters.get(sub) is fut:
                    self._settle_sub(sub, fut)

    async def publisher_wait(self, pub, size: int,
                             timeout: Optional[float]) -> bool:
        deadline = None if timeout is None else self.aloop.time() + timeout
        while not pub._ready(size):
            if pub.closed:
                raise ValueError("operation on a closed Publisher")
            remaining = None
            if deadline is not None:
                remaining = deadline - self.aloop.time()
                if remaining <= 0:
                    return False
            fut = self.aloop.create_future()
            waiters = self.pub_waiters.get(pub)
            first = waiters is None
            if first:
                waiters = self.pub_waiters[pub] = []
            waiters.append(fut)
            try:
                if first:
                    self.loop.add_pub(pub, functools.partial(
                        _pub_ready, weakref.ref(self), weakref.ref(pub)))
                self.run()
                await asyncio.wait_for(fut, remaining)
            except asyncio.TimeoutError:
                return False
            finally:
                waiters.remove(fut)
                if not waiters:
                    del self.pub_waiters[pub]
                    self.loop.remove(pub)
        return True


def _reactor() -> _Reactor:
    aloop = asyncio.get_running_loop()
    r = _reactors.get(aloop)
    if r is None:
        r = _reactors[aloop] = _Reactor(aloop)
    return r


async def next_message(sub):
    """The next message of ``sub`` (``async for``)."""
    return await _reactor().next_message(sub)


async def publisher_wait(pub, size: int = 0,
                         timeout: Optional[float] = None) -> bool:
    """Until a claim of ``size`` bytes would succeed; False on timeout."""
    return await _reactor().publisher_wait(pub, size, timeout)


async def publisher_send(pub, data, timeout: Optional[float] = None) -> None:
    """Offer ``data`` once there is demand and room."""
    size = memoryview(data).nbytes
    aloop = asyncio.get_running_loop()
    deadline = None if timeout is None else aloop.time() + timeout
    while True:
        remaining = None if deadline is None else deadline - aloop.time()
        if remaining is not None and remaining < 0:
            remaining = 0
        if not await publisher_wait(pub, size, remaining):
            raise TimeoutError("no demand or room for the message")
        try:
            pub.offer(data, 0)
            return
        except (NoDemandError, NoRoomError):
            continue


def wake(handle) -> None:
    """Wake tasks awaiting ``handle`` (after cancel() or close())."""
    for r in list(_reactors.values()):
        r.wake(handle)
