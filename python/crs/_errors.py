"""Exception classes of crs, shared by the extension module and Python code.

Every failure of a library call is an ``OSError`` carrying the errno value:
plain errno codes become Python's own subclasses (``FileNotFoundError`` for
ENOENT, ``TimeoutError``, ``PermissionError`` ...), and the library's own
codes (beyond errno, see ``include/crs/crs.h``) become subclasses of
:class:`crs.Error`. The end of a stream with an error is a
:class:`StreamError`.
"""


class Error(OSError):
    """A crs library code beyond errno; ``.errno`` holds it."""


class NoDemandError(Error):
    """CRS_ENODEMAND: subscribers have not requested more."""


class NoRoomError(Error):
    """CRS_ENOROOM: the ring is full of unconsumed messages."""


class EndedError(Error):
    """CRS_EEND: the stream ended for this subscriber."""


class ProtocolError(Error):
    """CRS_EPROTO: a peer broke the protocol."""


class VersionError(Error):
    """CRS_EVERSION: a peer speaks another layout or handshake version."""


class GapError(Error):
    """CRS_EGAP: a followed stream's name was taken by a new publisher;
    messages between the old stream's end and the new one's first may
    be missing."""


class StreamError(OSError):
    """The stream ended with an error (the terminal signal on_error).

    ``.code`` is the errno-style code (EPIPE: the publisher died or closed
    without completing; ECANCELED: disconnected; EINVAL: request(0); or
    the publisher's own code) and ``.message`` its text.
    """

    @property
    def code(self) -> int:
        return self.errno

    @property
    def message(self) -> str:
        return self.strerror


class StaleMessageError(ValueError):
    """The message was released (by release(), the next poll or close()):
    its ring space may already hold other data, so it cannot be read."""
