#!/usr/bin/env python3
"""Runs every shell, console, Python and JavaScript block of README.md as written.

The ctest case docs.readme_blocks (tests/CMakeLists.txt). A newcomer copies
README blocks into a shell on a machine where `scripts/run.sh` runs the
proxy; this does the same, so a block that does not run as written fails
the test command:

  * The world the README assumes: a redis-server on 127.0.0.1:6379 and a
    lockproxy with its defaults (127.0.0.1:7379, upstream 127.0.0.1:6379),
    `lockproxy` on the PATH (LP_PROXY_BIN, the binary under test). To have
    those fixed ports to itself on a shared machine, the runner re-executes
    itself in a network namespace of its own (`unshare -rn`, loopback
    only); where that is not allowed it runs on the host if the ports are
    free, and is SKIPPED (exit 77) otherwise.
  * Blocks run one after the other, in README order, in one scratch
    directory (so files one block makes, e.g. the TLS certificates, are
    there for the next), each in a process group of its own that is killed
    when the block ends (a block may start a server with `&`), each
    bounded by BLOCK_TIMEOUT seconds: a snippet that never ends (a client
    left open) fails.
      ```sh       run by bash with -e -o pipefail; must exit 0.
      ```console  each `$ command` runs in bash; the lines after it up to
                  the next `$ ` are its expected output (compared exactly,
                  blanks at line ends and \\r ignored; a line `...` stands
                  for any number of lines); must exit 0.
      ```python   run by a python3 that has redis-py; must exit 0.
      ```conf     a lockproxy config file: `lockproxy --config FILE` must
                  start with it (still running after CONF_SECONDS, then
                  stop cleanly on SIGTERM); --listen is overridden with a
                  Unix socket, the runner's proxy has 127.0.0.1:7379.
      ```js       run by node as a CommonJS file, ioredis and node-redis on
                  NODE_PATH (fetched by tests/clients/npm-install.sh, as the
                  client tests do); must exit 0. Without Node.js or the npm
                  registry these blocks are SKIPPED (exit 77 if all else
                  passed).
  * A block that must not run carries `<!-- norun: REASON -->` on the line
    just before its opening fence (invisible on GitHub). REASON is
    required, and printed, so each exception says why (and usually what
    tests it instead).

Usage: run_readme.py REPO_ROOT   (LP_PROXY_BIN names the lockproxy binary;
LP_CLIENTS_CACHE where the npm modules are cached, default next to it).
Exit 0 when every runnable block ran as written, 1 otherwise, 77 SKIPPED.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

LANGS = ("sh", "console", "python", "js", "conf")
BLOCK_TIMEOUT = 60
CONF_SECONDS = 2
NETNS_FLAG = "LP_README_IN_NETNS"
PORTS = (6379, 7379, 7380, 9121)


def log(msg):
    print(msg, flush=True)


def parse_blocks(text):
    """[(line, lang, body, norun_reason or None)] for the fenced blocks in LANGS."""
    lines = text.split("\n")
    blocks, used, i = [], set(), 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if lang in LANGS:
            reason = None
            k = start - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            nm = re.match(r"^<!--\s*norun:\s*(.*?)\s*-->\s*$", lines[k]) if k >= 0 else None
            if nm:
                reason = nm.group(1)
                used.add(k)
                if not reason:
                    raise SystemExit(f"README.md:{k + 1}: norun marker without a reason")
            blocks.append((start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", reason))
        i = j + 1
    # A marker that precedes no block is a mistake (a typo, or a block moved).
    for n, line in enumerate(lines):
        if re.match(r"^\s*<!--\s*norun", line) and n not in used:
            raise SystemExit(f"README.md:{n + 1}: norun marker not right before a "
                             f"```{'/```'.join(LANGS)} block")
    return blocks


def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_ping(port, proc, what, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"run_readme: {what} exited with {proc.returncode}")
        r = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True,
                           text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.1)
    raise SystemExit(f"run_readme: {what} does not answer PING on {port}")


def run_group(argv, cwd, env, timeout):
    """Runs argv in its own session; kills the whole group after. (rc, output)

    The output goes through a file, not a pipe, so a server the block left
    running in the background cannot hold the block open."""
    with tempfile.TemporaryFile(dir=cwd) as out:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        if rc is None:
            rc = p.wait()
            note = f"\n(still running after {timeout} s: killed)"
            rc = None
        else:
            note = ""
        out.seek(0)
        return rc, out.read().decode(errors="replace") + note


def console_steps(body):
    """[(command, [expected lines])] of a console block."""
    steps = []
    for line in body.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError(f"console block line before any '$ ' command: {line!r}")
    if not steps:
        raise ValueError("console block without a '$ ' command")
    return steps


def output_matches(got, want):
    got = [g.replace("\r", "").rstrip() for g in got.rstrip("\n").split("\n")] if got else []
    want = [w.rstrip() for w in want]
    while want and not want[-1]:
        want.pop()

    def match(gi, wi):
        if wi == len(want):
            return gi == len(got)
        if want[wi] == "...":
            return any(match(k, wi + 1) for k in range(gi, len(got) + 1))
        return gi < len(got) and got[gi] == want[wi] and match(gi + 1, wi + 1)

    return match(0, 0)


def run_block(lang, body, work, env, py):
    """(ok, output) of one block."""
    if lang == "sh":
        path = os.path.join(work, "block.sh")
        open(path, "w").write(body)
        rc, out = run_group(["bash", "-e", "-o", "pipefail", path], work, env, BLOCK_TIMEOUT)
        return rc == 0, out + ("" if rc == 0 else f"\n(exit status {rc})")
    if lang == "python":
        path = os.path.join(work, "block.py")
        open(path, "w").write(body)
        rc, out = run_group([py, path], work, env, BLOCK_TIMEOUT)
        return rc == 0, out + ("" if rc == 0 else f"\n(exit status {rc})")
    if lang == "js":
        path = os.path.join(work, "block.js")
        open(path, "w").write(body)
        rc, out = run_group(["node", path], work, env, BLOCK_TIMEOUT)
        return rc == 0, out + ("" if rc == 0 else f"\n(exit status {rc})")
    if lang == "conf":
        return run_conf(body, work, env)
    report = []
    for cmd, want in console_steps(body):
        rc, out = run_group(["bash", "-o", "pipefail", "-c", cmd], work, env, BLOCK_TIMEOUT)
        if rc != 0 or not output_matches(out, want):
            return False, (f"$ {cmd}\n(exit status {rc}) printed:\n{out}\n"
                           "the README shows:\n" + "\n".join(want))
        report.append(f"$ {cmd}: as shown")
    return True, "\n".join(report)


def run_conf(body, work, env):
    """(ok, output): lockproxy starts with the config block and stops cleanly."""
    path = os.path.join(work, "block.conf")
    open(path, "w").write(body)
    sock = os.path.join(work, "conf.sock")
    with tempfile.TemporaryFile(dir=work) as out:
        p = subprocess.Popen(["lockproxy", "--config", path, "--listen", "unix://" + sock],
                             cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=CONF_SECONDS)
            ok, why = False, f"lockproxy --config exited with {rc} at start-up"
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(timeout=15)
                ok, why = rc == 0, f"ran {CONF_SECONDS} s, then exited {rc} on SIGTERM"
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                ok, why = False, "did not stop on SIGTERM"
        out.seek(0)
        return ok, out.read().decode(errors="replace") + why


def python_with_redis():
    for candidate in ("/usr/bin/python3", "python3"):
        if subprocess.run([candidate, "-c", "import redis"], capture_output=True).returncode == 0:
            return candidate
    return None


def enter_netns():
    """Re-executes in a private network namespace; returns only when that is impossible."""
    if os.environ.get(NETNS_FLAG) or not shutil.which("unshare"):
        return
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True)
    if probe.returncode != 0:
        log("run_readme: no private network namespace here (unshare -rn refused): "
            "using the host's loopback")
        return
    env = dict(os.environ, **{NETNS_FLAG: "1"})
    script = ("ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null || true; "
              'exec "$@"')
    os.execvpe("unshare", ["unshare", "-rn", "sh", "-c", script, "sh",
                           sys.executable, *sys.argv], env)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = os.path.abspath(sys.argv[1])
    proxy_bin = os.environ.get("LP_PROXY_BIN")
    if not proxy_bin or not os.access(proxy_bin, os.X_OK):
        log("run_readme: LP_PROXY_BIN must name the lockproxy binary")
        return 2
    for tool in ("redis-server", "redis-cli", "openssl"):
        if not shutil.which(tool):
            log(f"SKIP: {tool} is not installed (scripts/deps.sh installs it)")
            return 77
    blocks = parse_blocks(open(os.path.join(root, "README.md"), encoding="utf-8").read())

    # Node modules need the registry: fetch them before leaving the network.
    node_path = os.environ.get("LP_README_NODE_PATH")
    if node_path is None:
        cache = os.environ.get("LP_CLIENTS_CACHE") or os.path.join(
            os.path.dirname(proxy_bin), "clients-cache")
        r = subprocess.run([os.path.join(root, "tests", "clients", "npm-install.sh"), cache],
                           capture_output=True, text=True)
        node_path = r.stdout.strip() if r.returncode == 0 else ""
        if r.returncode != 0:
            log(f"run_readme: the js blocks cannot run: {r.stderr.strip()[-300:]}")
        os.environ["LP_README_NODE_PATH"] = node_path
    enter_netns()
    busy = [p for p in PORTS if not port_free(p)]
    if busy:
        log(f"SKIP: ports {busy} are in use and no private network namespace is available")
        return 77

    work = tempfile.mkdtemp(prefix="lp-readme-")
    bindir = os.path.join(work, ".bin")
    os.makedirs(bindir)
    os.symlink(os.path.abspath(proxy_bin), os.path.join(bindir, "lockproxy"))
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
               HOME=work, NODE_PATH=node_path)
    servers = []
    t0 = time.monotonic()
    failed, skipped, ran = [], [], 0
    try:
        redis = subprocess.Popen(["redis-server", "--port", "6379", "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", work],
                                 stdout=open(os.path.join(work, "redis.log"), "w"),
                                 stderr=subprocess.STDOUT, start_new_session=True)
        servers.append(redis)
        wait_ping(6379, redis, "redis-server")
        proxy = subprocess.Popen([proxy_bin], stdout=open(os.path.join(work, "proxy.log"), "w"),
                                 stderr=subprocess.STDOUT, start_new_session=True)
        servers.append(proxy)
        wait_ping(7379, proxy, "lockproxy")
        py = python_with_redis()
        for line, lang, body, reason in blocks:
            where = f"README.md:{line} ```{lang}"
            if reason is not None:
                log(f"-- {where}: norun ({reason})")
                continue
            if lang == "js" and not node_path:
                log(f"-- {where}: SKIPPED (no Node.js modules; see above)")
                skipped.append(where)
                continue
            if lang == "python" and not py:
                log(f"-- {where}: SKIPPED (no python3 with redis-py; scripts/deps.sh)")
                skipped.append(where)
                continue
            t = time.monotonic()
            try:
                ok, out = run_block(lang, body, work, env, py)
            except ValueError as e:
                ok, out = False, str(e)
            ran += 1
            if ok and proxy.poll() is not None:
                ok, out = False, out + f"\nlockproxy exited ({proxy.returncode}) during the block"
            log(f"{'ok' if ok else 'FAIL'} {where} ({time.monotonic() - t:.1f} s)")
            if not ok:
                failed.append(where)
                log("   " + "\n   ".join(body.rstrip("\n").split("\n")))
                log("   ---- output ----\n   " + "\n   ".join(out.rstrip("\n").split("\n")))
        # The proxy the blocks used must stop cleanly and (sanitizer builds)
        # have reported nothing.
        proxy.send_signal(signal.SIGTERM)
        try:
            rc = proxy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        plog = open(os.path.join(work, "proxy.log"), errors="replace").read()
        if rc != 0 or re.search(r"Sanitizer|runtime error:", plog):
            failed.append(f"lockproxy (exit {rc} on SIGTERM, or a sanitizer report in its log)")
    finally:
        for p in reversed(servers):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        if failed:
            for name in ("proxy.log", "redis.log"):
                path = os.path.join(work, name)
                if os.path.exists(path):
                    log(f"---- tail of {name} ----")
                    log("".join(open(path, errors="replace").readlines()[-20:]))
        shutil.rmtree(work, ignore_errors=True)
    norun = sum(1 for b in blocks if b[3] is not None)
    log(f"run_readme: {ran} blocks run, {len(failed)} failed, {norun} marked norun, "
        f"{len(skipped)} skipped, in {time.monotonic() - t0:.1f} s")
    if failed:
        log("run_readme: FAIL: " + ", ".join(failed))
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
