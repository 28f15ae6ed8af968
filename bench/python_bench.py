#!/usr/bin/python3
"""python_bench.py - throughput of the Python binding beside the C library,
measured in the same run on the same handles.

For each size (32 B, 4 KiB, 1 MiB) one publisher process (this one) sends
to one subscriber process. Each side is either Python code or a C loop
inside the extension (crs._crs._bench_publish/_consume: the library's
claim/commit and poll/release, no Python per message) doing the same
work:

  publisher  offer       Python: pub.offer(bytes) - a copy per message
             offer_many  Python: pub.offer_many(1024 of them) per call
             claim       Python: with pub.claim(n) as buf: buf[:8] = seq
             c-offer     C: claim, copy n bytes in, commit (offer's work)
             c-claim     C: claim, write 8 bytes, commit (claim's work)
  subscriber iter        Python: for msg in sub: len(msg) (zero copy; at
                         1 MiB it also reads 8 bytes through memoryview)
             poll_many   Python: sub.poll_many(1024) - a bytes copy each
             c-view      C: poll, read 8 bytes, release (iter's work)
             c-copy      C: poll, copy into a fresh block, release

A ratio compares a run with Python on one side (or both) against the run
with the C loop doing that side's same work, the other side unchanged.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py
           [--quick] [--json] [--sizes 32,4096,1048576] [--rounds N]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import crs
from crs import _crs

COUNTS = {32: 1_000_000, 4096: 200_000, 1 << 20: 5_000}
PREFETCH = 1024
BATCH = 1024


def ring_for(size):
    return max(4 << 20, 8 * size)  # max_message is a quarter of the ring


def python_publish(pub, impl, size, count):
    if impl == "offer":
        data = bytes(size)
        offer = pub.offer
        for _ in range(count):
            offer(data)
    elif impl == "offer_many":
        chunk = [bytes(size)] * BATCH
        left = count
        while left >= BATCH:
            pub.offer_many(chunk)
            left -= BATCH
        pub.offer_many(chunk[:left])
    elif impl == "claim":
        claim = pub.claim
        for seq in range(count):
            with claim(size) as buf:
                buf[:8] = seq.to_bytes(8, "little")
    else:
        raise ValueError(impl)


def subscriber(name, impl, count):
    """Child process: consume count messages, print what arrived."""
    n = nbytes = 0
    with crs.Subscriber(name, wait=30, prefetch=PREFETCH) as sub:
        print("ready", flush=True)
        if impl in ("c-view", "c-copy"):
            n, nbytes = _crs._bench_consume(sub, count, impl == "c-copy")
        elif impl == "poll_many":
            while n < count:
                batch = sub.poll_many(BATCH, timeout=30)
                if not batch:
                    break
                n += len(batch)
                nbytes += sum(map(len, batch))
        elif impl == "iter":
            big = 0
            for msg in sub:
                n += 1
                nbytes += len(msg)
                if len(msg) >= 1 << 20:
                    with memoryview(msg) as v:
                        big ^= int.from_bytes(v[:8], "little")
                if n == count:
                    break
        else:
            raise ValueError(impl)
    print(json.dumps({"messages": n, "bytes": nbytes}), flush=True)


def one_run(size, pub_impl, sub_impl, count, name):
    with crs.Publisher(name, ring_bytes=ring_for(size)) as pub:
        child = subprocess.Popen(
            [sys.executable, __file__, "--role", "sub", "--impl", sub_impl,
             "--name", name, "--count", str(count)],
            stdout=subprocess.PIPE, text=True)
        try:
            if not pub.wait_subscribers(1, 30):
                raise RuntimeError("the subscriber did not arrive")
            assert child.stdout.readline().strip() == "ready"
            t0 = time.perf_counter()
            if pub_impl in ("c-claim", "c-offer"):
                _crs._bench_publish(pub, size, count, pub_impl == "c-offer")
            else:
                python_publish(pub, pub_impl, size, count)
            if not pub.wait_consumed(60):
                raise RuntimeError("the subscriber stalled")
            seconds = time.perf_counter() - t0
            pub.complete()
            got = json.loads(child.stdout.readline())
            if child.wait(60) != 0:
                raise RuntimeError("the subscriber failed")
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    if got != {"messages": count, "bytes": count * size}:
        raise RuntimeError(f"transfer broke: sent {count} x {size} B, got {got}")
    return seconds


# The C loop that does the same work as each Python side.
C_TWIN = {"offer": "c-offer", "offer_many": "c-offer", "claim": "c-claim",
          "iter": "c-view", "poll_many": "c-copy"}


def pairs_for(size):
    """(publisher, subscriber) pairs: each Python side against C, Python
    at both ends, and the C-C twins they are compared with."""
    if size >= 1 << 20:
        pys, subs = ["claim"], ["iter"]
        both = [("claim", "iter")]
    else:
        pys, subs = ["offer", "offer_many"], ["iter", "poll_many"]
        both = [("offer", "iter"), ("offer_many", "poll_many")]
    out = [(p, "c-view") for p in pys] + [("c-claim", s) for s in subs]
    out += both
    twins = []
    for p, s in out:
        tp, ts = C_TWIN.get(p, p), C_TWIN.get(s, s)
        if (tp, ts) not in twins:
            twins.append((tp, ts))
    return twins + out


def machine():
    load = os.getloadavg()
    return {"python": platform.python_version(), "cpus": os.cpu_count(),
            "load1": round(load[0], 2), "kernel": platform.release()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="a tenth of the messages, one round (smoke run)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--sizes", default="32,4096,1048576")
    ap.add_argument("--rounds", type=int, default=5,
                    help="repeat each pair, report the median")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--impl", help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "sub":
        return subscriber(a.name, a.impl, a.count)
    if not os.environ.get("CRS_DIR"):
        d = tempfile.mkdtemp(prefix="crs-pybench-")
        os.environ["CRS_DIR"] = d
    rounds = 1 if a.quick else a.rounds
    runs, ratios = [], []
    for size in (int(s) for s in a.sizes.split(",")):
        count = COUNTS.get(size, 100_000)
        if a.quick:
            count //= 10
        rates = {}
        pairs = pairs_for(size)
        # rounds outermost: each Python run sits between C runs of the
        # same round, so a machine that speeds up or slows down during
        # the run shifts both sides of a ratio alike
        secs = {pair: [] for pair in pairs}
        for r in range(rounds):
            for pub_impl, sub_impl in pairs:
                secs[(pub_impl, sub_impl)].append(one_run(
                    size, pub_impl, sub_impl, count,
                    f"pybench-{size}-{pub_impl}-{sub_impl}-{r}"))
        for pub_impl, sub_impl in pairs:
            s = statistics.median(secs[(pub_impl, sub_impl)])
            rate = count / s
            rates[(pub_impl, sub_impl)] = rate
            runs.append({"size": size, "publisher": pub_impl,
                         "subscriber": sub_impl, "messages": count,
                         "seconds": round(s, 6),
                         "msgs_per_s": round(rate),
                         "gb_per_s": round(rate * size / 1e9, 4)})
        for (p, s), rate in rates.items():
            twin = (C_TWIN.get(p, p), C_TWIN.get(s, s))
            if twin != (p, s):
                ratios.append({"size": size, "publisher": p,
                               "subscriber": s, "c_publisher": twin[0],
                               "c_subscriber": twin[1],
                               "ratio_vs_c": round(rate / rates[twin], 3)})
    doc = {"benchmark": "python-binding", "machine": machine(),
           "rounds": rounds, "runs": runs, "ratios": ratios}
    if a.json:
        print(json.dumps(doc, indent=1))
        return
    print(f"{'size':>8} {'publisher':>10} {'subscriber':>10} "
          f"{'msgs/s':>12} {'GB/s':>8} {'vs C':>6}  C twin")
    for r in runs:
        x = next((x for x in ratios
                  if (x["size"], x["publisher"], x["subscriber"]) ==
                  (r["size"], r["publisher"], r["subscriber"])), None)
        ratio = f"{x['ratio_vs_c']:6.3f}  {x['c_publisher']}/{x['c_subscriber']}" if x else "     -"
        print(f"{r['size']:>8} {r['publisher']:>10} {r['subscriber']:>10} "
              f"{r['msgs_per_s']:>12,} {r['gb_per_s']:>8.3f} {ratio}")
    print(f"machine: {doc['machine']}")


if __name__ == "__main__":
    main()
