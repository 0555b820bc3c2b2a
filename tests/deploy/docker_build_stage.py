#!/usr/bin/env python3
"""Builds deploy/Dockerfile's build stage without Docker (ctest deploy.docker_build_stage).

There is no Docker daemon on the test machines, so this does what
`docker build -f deploy/Dockerfile .` does for the build stage, from the
files a clean clone has:

  1. the build context: every file `git ls-files` lists (a clean clone's
     files), filtered by deploy/Dockerfile.dockerignore (BuildKit reads
     <Dockerfile>.dockerignore first) with Docker's rules: patterns are
     Go filepath.Match globs plus `**`, a pattern also matches everything
     under a directory it matches, `!` re-includes, the last match wins;
  2. the stage `FROM ... AS build`: its WORKDIR, each COPY from the
     context staged into a fresh temp directory exactly as written, and
     each RUN executed there with `sh -c` (the RUN that calls apt-get is
     checked instead: every package it names must be installed here, as
     scripts/deps.sh installs them);
  3. the other stages: every COPY source in the context must exist after
     the filter, and every COPY --from=build source must have been built;
     every shared library the built binary needs must come from a package
     the run stage installs (or from the base image: libc6, libgcc-s1).

So a file the build needs but the Dockerfile or the .dockerignore leaves
out (cmake/lua_embed.cmake did) fails here as it fails in `docker build`.
Compiler output is cached by ccache when it is installed (through
CMAKE_<LANG>_COMPILER_LAUNCHER in the environment, so the RUN lines run
as written). Exit 0 when the stage builds, 1 with the reason otherwise, 77 (SKIPPED)
outside a git checkout.
Usage: docker_build_stage.py REPO_ROOT
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1"}  # in debian:12-slim already


def fail(msg):
    print(f"docker_build_stage: FAIL: {msg}", flush=True)
    sys.exit(1)


def logical_lines(text):
    """The Dockerfile's instructions: continuation lines joined, comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        out.append(cur.strip())
        cur = ""
    if cur:
        out.append(cur.strip())
    return out


def stages(lines):
    """[(name, [(instruction, args)])] in order."""
    result = []
    for line in lines:
        instr, _, args = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", args, re.I)
            result.append((m.group(2) or "", []))
        elif result:
            result[-1][1].append((instr, args.strip()))
    return result


def glob_regex(pattern):
    """A Go filepath.Match pattern with Docker's `**`, as a regex on a path."""
    i, out = 0, ""
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):  # "**/" matches zero or more directories
                i += 1
                out += "(?:.*/)?"
            else:
                out += ".*"
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                out += re.escape(c)
            else:
                cls = pattern[i + 1:j]
                if cls.startswith("^"):
                    cls = "^" + cls[1:]
                out += "[" + cls.replace("\\", "\\\\") + "]"
                i = j
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out + r"\Z")


def load_dockerignore(path):
    rules = []
    if not os.path.exists(path):
        return rules
    for line in open(path, encoding="utf-8").read().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        if neg:
            line = line[1:].strip()
        line = os.path.normpath(line).lstrip("/")
        rules.append((neg, glob_regex(line)))
    return rules


def excluded(rel, rules):
    """Docker's rule: the last pattern matching the path or a parent of it wins."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    out = False
    for neg, rx in rules:
        if any(rx.match(p) for p in prefixes):
            out = not neg
    return out


def context_files(root, rules):
    r = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True)
    if r.returncode != 0 or not r.stdout:
        print("SKIP: not a git checkout (the build context is what `git ls-files` lists)")
        sys.exit(77)
    listed = r.stdout.decode().split("\0")
    return sorted(f for f in listed if f and os.path.isfile(os.path.join(root, f))
                  and not excluded(f, rules))


def copy_args(args):
    """(flags, sources, dest) of a COPY instruction (shell form or JSON form)."""
    words = shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    rest = [w for w in words if not w.startswith("--")]
    if rest and rest[0].startswith("["):
        import json
        rest = json.loads(" ".join(rest))
    return flags, rest[:-1], rest[-1]


def stage_copy(root, files, src, dest, workdir, stage_root):
    """Copies context path src (a file or a directory) as COPY does; returns the count."""
    src = os.path.normpath(src).lstrip("/")
    target = dest if dest.startswith("/") else os.path.join(workdir, dest)
    under = [f for f in files if f == src or f.startswith(src + "/") or src == "."]
    if not under:
        fail(f"COPY {src} {dest}: nothing in the build context matches '{src}' "
             "(missing from the repository, or excluded by deploy/Dockerfile.dockerignore)")
    for f in under:
        if f == src:
            rel_target = (os.path.join(target, os.path.basename(f))
                          if dest.endswith("/") else target)
        else:
            rel_target = os.path.join(target, os.path.relpath(f, src))
        out = os.path.join(stage_root, rel_target.lstrip("/"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copy2(os.path.join(root, f), out)
    return len(under)


def check_apt(args):
    """The apt-get RUN: every package it installs must be installed here."""
    words = shlex.split(args.replace("&&", " && "))
    pkgs, take = [], False
    for w in words:
        if w == "install":
            take = True
        elif w == "&&":
            take = False
        elif take and not w.startswith("-") and "=" not in w:
            pkgs.append(w)
    missing = [p for p in pkgs if subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
        text=True).stdout != "install ok installed"]
    return pkgs, missing


def needed_packages(binary):
    """The Debian packages of the shared libraries binary links directly
    (DT_NEEDED; theirs come with those packages' own dependencies)."""
    dyn = subprocess.run(["readelf", "-d", binary], check=True, capture_output=True,
                         text=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    pkgs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if not m or m.group(1) not in needed:
            continue
        real = os.path.realpath(m.group(2))
        owner = None
        for path in (m.group(2), real, real.replace("/usr/lib/", "/lib/", 1),
                     m.group(2).replace("/lib/", "/usr/lib/", 1)):
            r = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
            if r.returncode == 0:
                owner = r.stdout.split(":")[0]
                break
        pkgs[m.group(1)] = owner
    return pkgs


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = os.path.abspath(sys.argv[1])
    dockerfile = os.path.join(root, "deploy", "Dockerfile")
    rules = load_dockerignore(dockerfile + ".dockerignore")
    files = context_files(root, rules)
    all_stages = stages(logical_lines(open(dockerfile, encoding="utf-8").read()))
    names = [n for n, _ in all_stages]
    if "build" not in names:
        fail("deploy/Dockerfile has no stage 'AS build'")
    print(f"docker_build_stage: build context: {len(files)} files after "
          f"{os.path.basename(dockerfile)}.dockerignore", flush=True)

    tmp = tempfile.mkdtemp(prefix="lp-docker-build-")
    try:
        stage_root = os.path.join(tmp, "rootfs")
        workdir = "/"
        env = dict(os.environ)
        if shutil.which("ccache"):
            for lang in ("C", "CXX"):
                env.setdefault(f"CMAKE_{lang}_COMPILER_LAUNCHER", "ccache")
            env["CCACHE_BASEDIR"] = stage_root
            env["CCACHE_NOHASHDIR"] = "1"
        build_stage = all_stages[names.index("build")][1]
        for instr, args in build_stage:
            if instr == "WORKDIR":
                workdir = os.path.join(workdir, args)
                os.makedirs(os.path.join(stage_root, workdir.lstrip("/")), exist_ok=True)
            elif instr == "COPY":
                flags, srcs, dest = copy_args(args)
                if any(f.startswith("--from") for f in flags):
                    fail(f"build stage COPY {args}: --from is not supported here")
                for src in srcs:
                    n = stage_copy(root, files, src, dest, workdir, stage_root)
                    print(f"  COPY {src} {dest}: {n} files", flush=True)
            elif instr == "RUN":
                if "apt-get" in args:
                    pkgs, missing = check_apt(args)
                    if missing:
                        fail(f"build stage packages not installed here: {' '.join(missing)} "
                             "(scripts/deps.sh installs the build dependencies)")
                    print(f"  RUN apt-get: {len(pkgs)} packages, all installed here", flush=True)
                    continue
                print(f"  RUN {args}", flush=True)
                cwd = os.path.join(stage_root, workdir.lstrip("/"))
                r = subprocess.run(["sh", "-c", args], cwd=cwd, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if r.returncode != 0:
                    print("\n".join(r.stdout.splitlines()[-40:]))
                    fail(f"RUN exited {r.returncode} in the staged build context: {args}")
                print("    " + "\n    ".join(r.stdout.splitlines()[-2:]), flush=True)
            elif instr in ("ENV", "ARG"):
                fail(f"build stage {instr} is not handled by this check; teach it")

        # The other stages: their context files, and what they take from build.
        for name, instrs in all_stages:
            if name == "build":
                continue
            run_pkgs = set()
            for instr, args in instrs:
                if instr == "RUN" and "apt-get" in args:
                    run_pkgs.update(check_apt(args)[0])
            for instr, args in instrs:
                if instr != "COPY":
                    continue
                flags, srcs, dest = copy_args(args)
                for src in srcs:
                    if any(f == "--from=build" for f in flags):
                        built = os.path.join(stage_root, src.lstrip("/"))
                        if not os.path.isfile(built):
                            fail(f"COPY {args}: the build stage made no {src}")
                        libs = needed_packages(built)
                        gaps = {lib: pkg for lib, pkg in libs.items()
                                if pkg not in run_pkgs | BASE_IMAGE_PACKAGES}
                        if gaps:
                            fail(f"{src} needs {gaps}, which the run stage does not install "
                                 f"(it installs {' '.join(sorted(run_pkgs))})")
                        print(f"  run stage: {src} needs {sorted(set(libs.values()))}, "
                              "all installed there", flush=True)
                    elif not any(f == src or f.startswith(src.rstrip("/") + "/") for f in files):
                        fail(f"COPY {src} {dest} (run stage): not in the build context")
        print("docker_build_stage: ok: the build stage builds from the context the image gets")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
