#!/usr/bin/env python3
"""test_examples.py - every documented example works, every time.

Extracts the shell examples marked as runnable from README.md (a line
`<!-- example -->` right before a ```sh block) and from the man pages
man/*.1 (a line `.\\" example` before the .B lines of an example, up to
its .RE), and runs each of them RUNS times, each run in a fresh
directory with its own CRS_DIR and the files examples use (app.log, dir/,
data.tar), under a timeout. A run passes when every command of the
example, background jobs included, exits 0 within the timeout. An example
marked `example: then stop` has a background publisher that runs until
stopped: its foreground commands must succeed, then the run's processes
are stopped with SIGTERM.

Also: README's C example, built from README's text with CC and with
libcrs, and the whole program it stands for (examples/pubsub.c, crs-demo),
with the subscriber started first and with the publisher started first,
RUNS times each; and README's test command is the very line .ci/run runs.

usage: test_examples.py SOURCE_ROOT LIBCRS_SO CRS_DEMO TOOL... [--runs N]
       [--timeout SECONDS] -- CC [CFLAGS...]
(the examples find the TOOLs, crs-cat and crs-top, on PATH)
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

README_MARK = re.compile(r"<!-- example(: then stop)? -->$")
MAN_MARK = re.compile(r'\.\\" example(: then stop)?$')


class Example:
    def __init__(self, where, text, then_stop):
        self.where, self.text, self.then_stop = where, text, then_stop


def readme_examples(path):
    lines = open(path).read().splitlines()
    found = []
    for i, line in enumerate(lines):
        m = README_MARK.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or lines[i + 1] != "```sh":
            sys.exit(f"{path}:{i + 1}: an example mark not followed by ```sh")
        end = lines.index("```", i + 2)
        found.append(Example(f"{path}:{i + 3}", "\n".join(lines[i + 2:end]),
                             bool(m.group(1))))
    return found


def roff_to_shell(arg):
    if arg.startswith('"') and arg.endswith('"'):
        arg = arg[1:-1]
    for roff, text in (("\\-", "-"), ("\\(dq", '"'), ("\\&", ""), ("\\e", "\\")):
        arg = arg.replace(roff, text)
    return arg


def man_examples(path):
    lines = open(path).read().splitlines()
    found = []
    for i, line in enumerate(lines):
        m = MAN_MARK.match(line)
        if not m:
            continue
        try:
            end = lines.index(".RE", i)
        except ValueError:
            sys.exit(f"{path}:{i + 1}: an example mark without a .RE after it")
        cmds = [roff_to_shell(l[3:]) for l in lines[i + 1:end] if l.startswith(".B ")]
        if not cmds:
            sys.exit(f"{path}:{i + 1}: an example mark before no .B lines")
        found.append(Example(f"{path}:{i + 1}", "\n".join(cmds), bool(m.group(1))))
    return found


def both_orders(what, publisher, subscriber, check):
    """Publisher and subscriber commands run as an example, in each order.
    The subscriber may start first (it waits for the stream), and the
    publisher may (it waits for demand). The pause and the wait for the
    socket only make each order likely: either way the run must pass."""
    sub_first = (f"{subscriber} > sub.out &\nsleep 0.1\n"
                 f"{publisher}\nwait $!\n{check}")
    pub_first = (f"{publisher} &\n"
                 'for i in $(seq 1000); do [ -S "$CRS_DIR/numbers.sock" ] && break; '
                 "sleep 0.01; done\n"
                 f"{subscriber} > sub.out\nwait $!\n{check}")
    return [Example(f"{what}, subscriber first", sub_first, False),
            Example(f"{what}, publisher first", pub_first, False)]


# README's C example: its two processes as the two functions of a program.
C_WRAPPER = """#include <crs/crs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t n, sum;

static void use(const void *data, size_t len, uint64_t seq)
{
	uint64_t v = 0;
	memcpy(&v, data, len < sizeof(v) ? len : sizeof(v));
	sum += v;
	n += seq == n;
}

static void process_a(void)
{
%s
}

static void process_b(void)
{
%s
	printf("B: %%llu messages in order, checksum %%llu\\n",
	       (unsigned long long)n, (unsigned long long)sum);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "A"))
		process_a();
	else if (argc == 2 && !strcmp(argv[1], "B"))
		process_b();
	else
		return 2;
	return 0;
}
"""


def readme_c_program(readme, cc, libcrs, include_dir, out_dir):
    """Build README's C example (processes A and B) into a program."""
    text = open(readme).read()
    m = re.search(r"```c\n#include <crs/crs.h>\n(.*?)```", text, flags=re.S)
    if not m or "/* Process B" not in m.group(1):
        sys.exit(f"FAIL: {readme}: no C example with processes A and B found")
    a, b = m.group(1).split("/* Process B", 1)
    src = os.path.join(out_dir, "readme_example.c")
    with open(src, "w") as f:
        f.write(C_WRAPPER % (a, "/* Process B" + b))
    exe = os.path.join(out_dir, "readme_example")
    subprocess.run(cc + ["-std=c11", "-Wall", "-Werror", "-I", include_dir, "-o", exe,
                         src, libcrs, "-Wl,-rpath," + os.path.dirname(libcrs)],
                   check=True)
    return exe


def make_fixture(root):
    """The files the examples read: a log with some errors, a directory
    with text and binary data, and a tar of it."""
    with open(os.path.join(root, "app.log"), "w") as f:
        for i in range(300):
            f.write(f"2026-12-01 10:00:{i % 60:02d} {'ERROR' if i % 7 == 0 else 'INFO'}"
                    f" request {i} done\n")
    d = os.path.join(root, "dir")
    os.mkdir(d)
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("crs example data\n" * 100)
    with open(os.path.join(d, "blob.bin"), "wb") as f:
        f.write(bytes((i * 131 + 7) % 256 for i in range(300 * 1024)))
    with tarfile.open(os.path.join(root, "data.tar"), "w") as t:
        t.add(d, arcname="dir")


def stop_group(pgid):
    """End the processes a run left behind (its own process group)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return sig == signal.SIGTERM
            time.sleep(0.02)
    return False


def run_once(example, run, fixture, env_path, timeout_s):
    work = tempfile.mkdtemp(prefix="example.", dir=os.environ.get("CRS_TEST_TMP"))
    log = None
    try:
        shutil.copytree(fixture, work, dirs_exist_ok=True)
        crs_dir = os.path.join(work, ".crs")
        os.mkdir(crs_dir, 0o700)
        env = dict(os.environ, PATH=env_path, CRS_DIR=crs_dir)
        script = "set -e -o pipefail\n" + example.text + "\n"
        if not example.then_stop:  # background jobs must succeed too
            script += 'for job in $(jobs -p); do wait "$job"; done\n'
        # Output to files, not pipes: a background publisher left to be
        # stopped would hold a pipe open after the script ended.
        log = open(os.path.join(work, ".output"), "w+b")
        p = subprocess.Popen(["bash", "-c", script], cwd=work, env=env,
                             stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            p.wait(timeout=timeout_s)
            problem = f"exit status {p.returncode}" if p.returncode else None
        except subprocess.TimeoutExpired:
            problem = f"still running after {timeout_s:g} s"
        if not stop_group(p.pid) and not problem:
            problem = "background processes ignored SIGTERM"
        if problem:
            log.seek(0)
            tail = log.read().decode(errors="replace").strip().splitlines()[-5:]
            return (f"FAIL: {example.where}, run {run}: {problem}\n"
                    + "".join(f"    | {l}\n" for l in example.text.splitlines())
                    + "".join(f"    ! {l}\n" for l in tail))
        return None
    finally:
        if log:
            log.close()
        shutil.rmtree(work, ignore_errors=True)


def check_ci_command(root):
    """README's test command is the line .ci/run runs."""
    readme = open(os.path.join(root, "README.md")).read()
    m = re.search(r"```sh\n(scripts/install-deps && meson setup build && "
                  r"meson test[^\n]*)\n```", readme)
    if not m:
        return "FAIL: README.md: no test command (install-deps ... meson test) found"
    if m.group(1) not in open(os.path.join(root, ".ci/run")).read().splitlines():
        return "FAIL: .ci/run does not run README's test command verbatim"
    return None


def main():
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    cc = sys.argv[split + 1:]
    parser = argparse.ArgumentParser(description="run the documented examples")
    parser.add_argument("root")
    parser.add_argument("libcrs")
    parser.add_argument("demo")
    parser.add_argument("tools", nargs="+")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=30)
    opt = parser.parse_args(sys.argv[1:split])
    if not cc:
        parser.error("no compiler after --")
    root, runs = opt.root, opt.runs
    libcrs, demo = os.path.abspath(opt.libcrs), os.path.abspath(opt.demo)

    examples = readme_examples(os.path.join(root, "README.md"))
    if not examples:
        sys.exit("FAIL: README.md has no example marked <!-- example -->")
    man_dir = os.path.join(root, "man")
    for page in sorted(os.listdir(man_dir)):
        if page.endswith(".1"):
            examples += man_examples(os.path.join(man_dir, page))
    examples += both_orders("crs-demo (examples/pubsub.c)",
                            f"{demo} publish numbers 1000", f"{demo} subscribe numbers",
                            'grep -q "subscriber: 1000 messages (checksum 499500)" sub.out')
    build = tempfile.mkdtemp(prefix="readme-c.", dir=os.environ.get("CRS_TEST_TMP"))
    prog = readme_c_program(os.path.join(root, "README.md"), cc, libcrs,
                            os.path.join(root, "include"), build)
    examples += both_orders("README's C example", f"{prog} A", f"{prog} B",
                            'grep -q "B: 1000 messages in order, checksum 499500" sub.out')

    failures = [f for f in [check_ci_command(root)] if f]
    tool_dirs = [os.path.dirname(os.path.abspath(t)) for t in opt.tools]
    env_path = os.pathsep.join(tool_dirs + [os.environ["PATH"]])
    with tempfile.TemporaryDirectory(dir=os.environ.get("CRS_TEST_TMP")) as fixture:
        make_fixture(fixture)
        # Runs mostly wait (for demand, a linger, a peer), so six at once
        # fit on two CPUs.
        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            jobs = {pool.submit(run_once, ex, r, fixture, env_path, opt.timeout): ex
                    for ex in examples for r in range(1, runs + 1)}
            for job in concurrent.futures.as_completed(jobs):
                if job.result():
                    failures.append(job.result())
    for ex in examples:
        bad = sum(1 for f in failures if f.startswith(f"FAIL: {ex.where},"))
        print(f"{'FAIL' if bad else 'ok'}: {ex.where}: {runs - bad}/{runs} runs passed")
    for f in sorted(failures):
        print(f, end="" if f.endswith("\n") else "\n")
    shutil.rmtree(build, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
