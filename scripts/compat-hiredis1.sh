#!/usr/bin/env bash
# Builds lockproxy against hiredis 1.x (Debian 13's libhiredis-dev) and runs
# the unit tests and the protocol and pool integration tests with it, so the
# tree keeps building against both hiredis 0.14 (Debian 12) and 1.x
# (Debian 13, Ubuntu 24.04).
#
# The two .debs (libhiredis-dev, libhiredis1.1.0) come from Debian trixie
# through apt itself, with a private apt configuration under the build dir:
# apt checks the archive's signature (debian-archive-keyring holds the
# trixie keys) and every file's hash. They are unpacked with dpkg -x into
# the build dir (nothing is installed) and cached there, so later runs do
# not download again. The project is configured with PKG_CONFIG_PATH
# pointing at that copy, and the tests run with LD_LIBRARY_PATH on it.
#
# Exit status: 0 built and passed; 1 the build or a test failed; 77 the
# .debs could not be downloaded (said loudly: nothing was checked).
# LP_COMPAT_BUILD_DIR overrides the directory (default build-hiredis1),
# LP_CTEST_JOBS the test parallelism.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(mkdir -p "${LP_COMPAT_BUILD_DIR:-$ROOT/build-hiredis1}" && cd "${LP_COMPAT_BUILD_DIR:-$ROOT/build-hiredis1}" && pwd)
DEBS=$DIR/debs
PREFIX=$DIR/prefix
BUILD=$DIR/build
SUITE=trixie
PACKAGES=(libhiredis-dev libhiredis1.1.0)
ARCH=$(dpkg --print-architecture)
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)

say() { echo "compat-hiredis1: $*"; }

# Downloads the .debs with a throw-away apt state (lists, cache) under $DIR.
download() {
    local apt=$DIR/apt
    rm -rf "$apt" "$DEBS.tmp"
    mkdir -p "$apt"/{lists/partial,cache/archives/partial,etc/apt.conf.d,etc/preferences.d,etc/sources.list.d} "$DEBS.tmp"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" \
        >"$apt/etc/sources.list"
    cat >"$apt/apt.conf" <<EOF
Dir::State "$apt";
Dir::State::lists "$apt/lists";
Dir::State::status "/var/lib/dpkg/status";
Dir::Cache "$apt/cache";
Dir::Etc::sourcelist "$apt/etc/sources.list";
Dir::Etc::sourceparts "$apt/etc/sources.list.d";
Dir::Etc::main "$apt/etc/none.conf";
Dir::Etc::parts "$apt/etc/apt.conf.d";
Dir::Etc::preferences "$apt/etc/preferences";
Dir::Etc::preferencesparts "$apt/etc/preferences.d";
APT::Architecture "$ARCH";
APT::Sandbox::User "$(id -un)";
Acquire::Languages "none";
Debug::NoLocking "true";
EOF
    if ! APT_CONFIG=$apt/apt.conf apt-get update -qq >"$apt/update.log" 2>&1 ||
        grep -qE '^(W|E): ' "$apt/update.log"; then
        cat "$apt/update.log" >&2
        return 1
    fi
    if ! (cd "$DEBS.tmp" && APT_CONFIG=$apt/apt.conf apt-get download -qq "${PACKAGES[@]}") \
        >"$apt/download.log" 2>&1; then
        cat "$apt/download.log" >&2
        return 1
    fi
    rm -rf "$apt" "$DEBS"
    mv "$DEBS.tmp" "$DEBS"
}

if ! compgen -G "$DEBS/libhiredis-dev_*.deb" >/dev/null || ! compgen -G "$DEBS/libhiredis1.1.0_*.deb" >/dev/null; then
    say "downloading ${PACKAGES[*]} from Debian $SUITE (signed archive)"
    if ! download; then
        say "SKIPPED: could not download ${PACKAGES[*]} from deb.debian.org ($SUITE):"
        say "the build against hiredis 1.x was NOT checked"
        exit 77
    fi
fi
VERSION=$(dpkg-deb --field "$(compgen -G "$DEBS/libhiredis-dev_*.deb" | head -n1)" Version)
case $VERSION in
1.*) ;;
*)
    say "unexpected libhiredis-dev version $VERSION (want 1.x)" >&2
    exit 1
    ;;
esac

# Unpacks once per set of .debs; the .pc names /usr, so point it here.
if [ ! -f "$PREFIX/.unpacked" ] || [ "$(cat "$PREFIX/.unpacked")" != "$VERSION" ]; then
    rm -rf "$PREFIX"
    mkdir -p "$PREFIX/pkgconfig"
    for deb in "$DEBS"/*.deb; do
        dpkg-deb -x "$deb" "$PREFIX/root"
    done
    sed -e "s|=/usr|=$PREFIX/root/usr|" \
        -e "s|^libdir=.*|libdir=$PREFIX/root/usr/lib/$MULTIARCH|" \
        "$PREFIX/root/usr/lib/$MULTIARCH/pkgconfig/hiredis.pc" >"$PREFIX/pkgconfig/hiredis.pc"
    echo "$VERSION" >"$PREFIX/.unpacked"
fi
LIBDIR=$PREFIX/root/usr/lib/$MULTIARCH

say "building against hiredis $VERSION in $BUILD"
mkdir -p "$BUILD"
# shellcheck source=scripts/progress.sh
. "$ROOT/scripts/progress.sh"
# shellcheck disable=SC2317 # run through lp_progress_run
configure_and_build() {
    PKG_CONFIG_PATH=$PREFIX/pkgconfig cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLP_WERROR=ON &&
        cmake --build "$BUILD" -j"$(nproc)"
}
if ! lp_progress_run "build $BUILD" "$BUILD/build.log" configure_and_build; then
    grep -E 'error|Error' "$BUILD/build.log" | head -50 || true
    tail -n 30 "$BUILD/build.log"
    say "FAILED: lockproxy does not build against hiredis $VERSION" >&2
    exit 1
fi

# The build must have used the copy, at compile time and at run time.
grep -q "^HIREDIS_VERSION:INTERNAL=$VERSION" "$BUILD/CMakeCache.txt" 2>/dev/null ||
    grep -q "HIREDIS_VERSION:INTERNAL=${VERSION%%-*}" "$BUILD/CMakeCache.txt" || {
    say "FAILED: CMake did not pick hiredis $VERSION:" >&2
    grep HIREDIS_VERSION "$BUILD/CMakeCache.txt" >&2 || true
    exit 1
}
export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# (grep reads all of ldd's output: with -q it would stop at the match, and
# ldd, still writing the libraries after it, would die of SIGPIPE and fail
# the pipeline under pipefail.)
# The proxy takes only hiredis's reply type and reads replies itself
# (pool/reader.c), so it may not load hiredis at all; the test clients and
# the reader's comparison with hiredis's (unit.pool resp tests) call it.
# Whatever loads hiredis must load this copy.
for bin in "$BUILD/tests/unit_pool_test_resp" "$BUILD/tests/integration_pool_test_pool"; do
    if ! ldd "$bin" | grep "$LIBDIR/libhiredis.so.1" >/dev/null; then
        say "FAILED: $bin does not load $LIBDIR/libhiredis.so.1:" >&2
        ldd "$bin" | grep hiredis >&2 || true
        exit 1
    fi
done
if ldd "$BUILD/lockproxy" | grep libhiredis | grep -v "$LIBDIR/" >/dev/null; then
    say "FAILED: build/lockproxy loads another hiredis:" >&2
    ldd "$BUILD/lockproxy" | grep hiredis >&2
    exit 1
fi

say "running the unit tests and the protocol and pool integration tests"
if ! ctest --test-dir "$BUILD" --output-on-failure -j"${LP_CTEST_JOBS:-2}" \
    -R '^(unit\.|integration\.(protocol|pool)\.)'; then
    say "FAILED: tests against hiredis $VERSION" >&2
    exit 1
fi
say "ok: built and tested against hiredis $VERSION"
