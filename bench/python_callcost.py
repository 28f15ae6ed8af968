#!/usr/bin/python3
"""python_callcost.py - what one received message costs in Python through
the crs extension (a C type with the buffer protocol) against the same
library calls made through ctypes and cffi (ABI mode): crs_sub_poll,
a view of the payload, crs_sub_release, for small messages already in
the ring. One process: a publisher fills the ring, each binding drains
it; ns per message, best of a few rounds, JSON with --json.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_callcost.py
           [--lib build/libcrs.so] [--json]
"""
import argparse
import ctypes
import json
import os
import tempfile
import threading
import time

import crs

N = 20_000  # messages per round: what a 1 MiB ring holds at 32 B
SIZE = 32


class Msg(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t),
                ("seq", ctypes.c_uint64)]


def open_sub(pub, name, **kw):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault(
        "s", crs.Subscriber(name, wait=10, **kw)))
    t.start()
    while t.is_alive():
        pub.wait_subscribers(1, 0.05)
    t.join()
    return box["s"]


def fill(pub):
    data = bytes(SIZE)
    for _ in range(N):
        pub.offer(data, 10)


def drain_extension(sub):
    t0 = time.perf_counter_ns()
    n = 0
    poll = sub.poll
    while n < N:
        msg = poll()
        with memoryview(msg) as v:
            n += v.nbytes > 0
    return time.perf_counter_ns() - t0


def drain_poll_many(sub):
    t0 = time.perf_counter_ns()
    n = 0
    while n < N:
        n += len(sub.poll_many(1024))
    return time.perf_counter_ns() - t0


def ctypes_sub(lib, name):
    lib.crs_sub_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_void_p)]
    lib.crs_sub_poll.argtypes = [ctypes.c_void_p, ctypes.POINTER(Msg)]
    lib.crs_sub_release.argtypes = [ctypes.c_void_p]
    lib.crs_sub_close.argtypes = [ctypes.c_void_p]
    lib.crs_sub_request.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    h = ctypes.c_void_p()
    err = lib.crs_sub_open(name.encode(), None, ctypes.byref(h))
    assert err == 0, err
    return h


def drain_ctypes(lib, h):
    m = Msg()
    ref = ctypes.byref(m)
    poll, release = lib.crs_sub_poll, lib.crs_sub_release
    t0 = time.perf_counter_ns()
    n = 0
    while n < N:
        if poll(h, ref) == 1:
            v = memoryview((ctypes.c_char * m.len).from_address(m.data))
            n += v.nbytes > 0
            release(h)
    return time.perf_counter_ns() - t0


def cffi_sub(libpath, name):
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("""
        struct crs_msg { const void *data; size_t len; uint64_t seq; };
        int crs_sub_open(const char *, const void *, void **);
        int crs_sub_poll(void *, struct crs_msg *);
        void crs_sub_release(void *);
        void crs_sub_close(void *);
        int crs_sub_request(void *, uint64_t);
    """)
    lib = ffi.dlopen(libpath)
    out = ffi.new("void **")
    assert lib.crs_sub_open(name.encode(), ffi.NULL, out) == 0
    lib.crs_sub_request(out[0], 1 << 62)
    return ffi, lib, out[0]


def drain_cffi(ffi, lib, h):
    m = ffi.new("struct crs_msg *")
    poll, release, buffer = lib.crs_sub_poll, lib.crs_sub_release, ffi.buffer
    t0 = time.perf_counter_ns()
    n = 0
    while n < N:
        if poll(h, m) == 1:
            v = memoryview(buffer(m.data, m.len))
            n += v.nbytes > 0
            release(h)
    return time.perf_counter_ns() - t0


def best(pub, drain, rounds=5):
    times = []
    for _ in range(rounds):
        fill(pub)
        times.append(drain())
    return min(times) / N


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libcrs.so")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("CRS_DIR", tempfile.mkdtemp(prefix="crs-cost-"))
    res = {}
    with crs.Publisher("cost", ring_bytes=1 << 21) as pub:
        sub = open_sub(pub, "cost", prefetch=0)
        sub.request(crs.UNBOUNDED)
        res["extension_poll"] = best(pub, lambda: drain_extension(sub))
        res["extension_poll_many"] = best(pub, lambda: drain_poll_many(sub))
        sub.close()
    with crs.Publisher("cost2", ring_bytes=1 << 21) as pub:
        lib = ctypes.CDLL(os.path.abspath(a.lib))
        box = {}
        t = threading.Thread(target=lambda: box.setdefault(
            "h", ctypes_sub(lib, "cost2")))
        t.start()
        while t.is_alive():
            pub.wait_subscribers(1, 0.05)
        t.join()
        lib.crs_sub_request(box["h"], 1 << 62)
        res["ctypes"] = best(pub, lambda: drain_ctypes(lib, box["h"]))
        lib.crs_sub_close(box["h"])
    try:
        import cffi  # noqa: F401
    except ImportError:
        res["cffi"] = None
    else:
        with crs.Publisher("cost3", ring_bytes=1 << 21) as pub:
            box = {}
            t = threading.Thread(target=lambda: box.setdefault(
                "c", cffi_sub(os.path.abspath(a.lib), "cost3")))
            t.start()
            while t.is_alive():
                pub.wait_subscribers(1, 0.05)
            t.join()
            ffi, clib, h = box["c"]
            res["cffi"] = best(pub, lambda: drain_cffi(ffi, clib, h))
            clib.crs_sub_close(h)
    doc = {"benchmark": "python-callcost", "size": SIZE,
           "ns_per_message": {k: (round(v, 1) if v else v)
                              for k, v in res.items()},
           "load1": round(os.getloadavg()[0], 2)}
    if a.json:
        print(json.dumps(doc, indent=1))
    else:
        for k, v in doc["ns_per_message"].items():
            print(f"{k:>22}: {v} ns/message" if v else f"{k:>22}: n/a")
        print(f"load: {doc['load1']}")


if __name__ == "__main__":
    main()
