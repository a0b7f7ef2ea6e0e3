#!/bin/sh
# Installs the C interface of hushtrace under a prefix:
#   <prefix>/include/hushtrace.h
#   <prefix>/lib/libhushtrace.so.<version>   the library (SONAME libhushtrace.so.<ABI>), with
#   <prefix>/lib/libhushtrace.so.<ABI>       -> the SONAME link programs load at run time
#   <prefix>/lib/libhushtrace.so             -> the link `-lhushtrace` finds
#   <prefix>/lib/libhushtrace.a
#   <prefix>/lib/pkgconfig/hushtrace.pc
#   <prefix>/lib/debug/libhushtrace.so.<version>.debug   its debug info (split off; see below)
# so that `cc app.c $(pkg-config --cflags --libs hushtrace)` builds a program that runs
# (with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig for a prefix pkg-config does not search).
# A prefix whose lib/ the dynamic loader does not search (anything but /usr, /usr/local, /):
# pkg-config's --libs carry an rpath to it. /usr/local/lib: run `ldconfig` after installing
# (done here when run as root without DESTDIR).
#
# Usage: sh crates/hushtrace-c/install.sh --prefix /usr/local [--lib-dir DIR] [--keep-debug]
#   --lib-dir DIR  take libhushtrace.{so,a} from DIR instead of building them with
#                  `cargo build --release -p hushtrace-c` (into $CARGO_TARGET_DIR or target/).
#   --keep-debug   install the libraries with their debug info (default: the shared library's
#                  goes to lib/debug/ with a .gnu_debuglink, the archive's is stripped).
# DESTDIR is honoured (staged installs for packaging).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=
libsrc=
keep_debug=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --lib-dir) libsrc=$2; shift 2 ;;
        --lib-dir=*) libsrc=${1#--lib-dir=}; shift ;;
        --keep-debug) keep_debug=1; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$prefix" ] || { echo "install.sh: --prefix is required" >&2; exit 2; }
case "$prefix" in /*) ;; *) prefix=$(pwd)/$prefix ;; esac

if [ -z "$libsrc" ]; then
    (cd "$root" && cargo build --release -p hushtrace-c)
    libsrc=${CARGO_TARGET_DIR:-$root/target}/release
fi
for f in libhushtrace.so libhushtrace.a; do
    [ -f "$libsrc/$f" ] || { echo "install.sh: $libsrc/$f missing" >&2; exit 1; }
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
version=${version:-0.0.0}
# The SONAME build.rs gave the library (libhushtrace.so.<ABI>).
soname=$(objdump -p "$libsrc/libhushtrace.so" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
case "$soname" in
    libhushtrace.so.*) ;;
    *) echo "install.sh: $libsrc/libhushtrace.so has no SONAME libhushtrace.so.<ABI> (objdump from binutils is needed; rebuild with cargo build --release -p hushtrace-c)" >&2; exit 1 ;;
esac
real=libhushtrace.so.$version
dest=${DESTDIR:-}$prefix
libdir=$prefix/lib
install -d "$dest/include" "$dest/lib/pkgconfig"
install -m 644 "$here/include/hushtrace.h" "$dest/include/hushtrace.h"
rm -f "$dest/lib/libhushtrace.so" "$dest/lib/$soname"
install -m 755 "$libsrc/libhushtrace.so" "$dest/lib/$real"
install -m 644 "$libsrc/libhushtrace.a" "$dest/lib/libhushtrace.a"
[ "$soname" = "$real" ] || ln -s "$real" "$dest/lib/$soname"
ln -s "$soname" "$dest/lib/libhushtrace.so"
if [ -z "$keep_debug" ]; then
    # Debug info is most of the size (megabytes): split it off the shared library (gdb finds
    # it through the .gnu_debuglink), strip it from the archive (programs would carry it).
    install -d "$dest/lib/debug"
    objcopy --only-keep-debug "$dest/lib/$real" "$dest/lib/debug/$real.debug"
    chmod 644 "$dest/lib/debug/$real.debug"
    strip --strip-debug "$dest/lib/$real"
    (cd "$dest/lib" && objcopy --add-gnu-debuglink="debug/$real.debug" "$real")
    strip --strip-debug "$dest/lib/libhushtrace.a"
fi

# The loader's default directories need no rpath (ldconfig's cache covers them).
case "$libdir" in
    /usr/lib | /lib | /usr/local/lib) rpath= ;;
    *) rpath=" -Wl,-rpath,\${libdir}" ;;
esac
cat > "$dest/lib/pkgconfig/hushtrace.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: hushtrace
Description: Userspace tracer safe for real-time threads (no-syscall mode) and correct across fork()
URL: https://docs.rs/hushtrace
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir}$rpath -lhushtrace
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl
PC
echo "installed hushtrace $version under $dest (header, $real with links $soname and libhushtrace.so, libhushtrace.a, lib/pkgconfig/hushtrace.pc)"
if [ -z "$rpath" ]; then
    if [ -z "${DESTDIR:-}" ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null 2>&1; then
        ldconfig
        echo "ran ldconfig: programs find $soname in $libdir"
    else
        echo "run 'sudo ldconfig' so that programs find $soname in $libdir"
    fi
fi
