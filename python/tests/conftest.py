"""Fixtures for the crs binding tests: a private CRS_DIR per test, peer
processes (peer.py, crs-cat) started as real programs, and a helper that
opens a subscriber in the test's own process."""
import os
import subprocess
import sys
import threading

import pytest

import crs

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "peer.py")
HANG_LIMIT = 60  # seconds: anything slower than this is a hang


@pytest.fixture(autouse=True)
def crs_dir(tmp_path, monkeypatch):
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("CRS_DIR", str(d))
    return d


@pytest.fixture
def crs_cat():
    path = os.environ.get("CRS_CAT")
    if not path:
        pytest.skip("CRS_CAT (the crs-cat program) not given")
    return path


class Peer:
    """A peer.py (or any) child process with pipes, killed at the end."""

    def __init__(self, args, stdin=None):
        self.proc = subprocess.Popen(
            args, stdin=stdin, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)

    def readline(self) -> str:
        line = self.proc.stdout.readline().decode()
        assert line, "peer exited early: " + self.proc.stderr.read().decode()
        return line.strip()

    def finish(self):
        out, err = self.proc.communicate(timeout=HANG_LIMIT)
        assert self.proc.returncode == 0, err.decode()
        return out.decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=HANG_LIMIT)
        for f in (self.proc.stdout, self.proc.stderr, self.proc.stdin):
            if f:
                f.close()


@pytest.fixture
def peer():
    peers = []

    def start(*args, program=None, stdin=None):
        cmd = [program] if program else [sys.executable, PEER]
        p = Peer(cmd + [str(a) for a in args], stdin=stdin)
        peers.append(p)
        return p

    yield start
    for p in peers:
        p.kill()


def open_sub(pub, name, **kw):
    """A Subscriber of our own publisher: opened on a thread while this
    one serves the handshake."""
    box = {}

    def run():
        try:
            box["sub"] = crs.Subscriber(name, wait=10, **kw)
        except BaseException as e:  # reported below
            box["err"] = e

    t = threading.Thread(target=run)
    t.start()
    while t.is_alive():
        pub.wait_subscribers(pub.subscribers + 1, 0.05)
    t.join()
    if "err" in box:
        raise box["err"]
    return box["sub"]


@pytest.fixture
def local_pair():
    """(pub, sub) in this process, closed at the end."""
    made = []

    def make(name="local", pub_kw=None, sub_kw=None):
        pub = crs.Publisher(name, **(pub_kw or {}))
        sub = open_sub(pub, name, **(sub_kw or {}))
        made.append((pub, sub))
        return pub, sub

    yield make
    for pub, sub in made:
        sub.close()
        pub.close()
