"""A crs peer process for the tests: run as `python3 peer.py ROLE ...`.

Roles (the stream's CRS_DIR comes from the environment):
  pub NAME COUNT SIZES  publish COUNT messages, payload(seq, size) with
                        size cycling through SIZES (comma-separated),
                        wait for a subscriber first, then complete and
                        wait until consumed
  sub NAME              subscribe and print one JSON line: count, the
                        seqs' first and last, a digest over (seq, bytes)
  hang NAME COUNT       publish COUNT messages of 64 bytes, then print
                        "hanging" and only serve (until killed)
  block-offer NAME      publish with no subscriber: offer blocks; prints
                        "blocking" first (for the Ctrl-C test)
  block-next NAME       subscribe to a silent stream and iterate; prints
                        "blocking" first
"""
import hashlib
import json
import sys

import crs


def payload(seq: int, size: int) -> bytes:
    """Deterministic bytes, different for every (seq, size)."""
    seed = hashlib.blake2b(f"{seq}:{size}".encode(), digest_size=32).digest()
    return (seed * (size // 32 + 1))[:size]


def digest_of(pairs) -> str:
    h = hashlib.sha256()
    for seq, data in pairs:
        h.update(seq.to_bytes(8, "little"))
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def main(argv):
    role, name = argv[1], argv[2]
    if role == "pub":
        count, sizes = int(argv[3]), [int(s) for s in argv[4].split(",")]
        with crs.Publisher(name, ring_bytes=1 << 20) as pub:
            pub.wait_subscribers(1, 30)
            for seq in range(count):
                data = payload(seq, sizes[seq % len(sizes)])
                if seq % 2:
                    pub.offer(data)
                else:
                    with pub.claim(len(data)) as buf:
                        buf[:] = data
            pub.complete()
            pub.wait_consumed(30)
    elif role == "sub":
        h = hashlib.sha256()
        count, first, last = 0, None, None
        with crs.Subscriber(name, wait=30) as sub:
            print("subscribed", flush=True)
            for msg in sub:
                data = bytes(msg)
                h.update(msg.seq.to_bytes(8, "little"))
                h.update(len(data).to_bytes(8, "little"))
                h.update(data)
                first = msg.seq if first is None else first
                last = msg.seq
                count += 1
        print(json.dumps({"count": count, "first": first, "last": last,
                          "digest": h.hexdigest()}), flush=True)
    elif role == "hang":
        with crs.Publisher(name) as pub:
            pub.wait_subscribers(1, 30)
            for seq in range(int(argv[3])):
                pub.offer(payload(seq, 64))
            print("hanging", flush=True)
            while True:  # keep serving (the inspector asks), publish no more
                pub.wait_subscribers(1000, 1.0)
    elif role == "block-offer":
        with crs.Publisher(name) as pub:
            print("blocking", flush=True)
            pub.offer(b"no one asked")
    elif role == "block-next":
        with crs.Subscriber(name, wait=30) as sub:
            print("blocking", flush=True)
            next(sub)
    else:
        raise SystemExit(f"unknown role {role}")


if __name__ == "__main__":
    main(sys.argv)
