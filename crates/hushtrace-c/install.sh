#!/bin/sh
# Installs the C interface of hushtrace under a prefix:
#   <prefix>/include/hushtrace.h
#   <prefix>/lib/libhushtrace.so, <prefix>/lib/libhushtrace.a
#   <prefix>/lib/pkgconfig/hushtrace.pc
# so that `cc app.c $(pkg-config --cflags --libs hushtrace)` works
# (with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig for a prefix pkg-config does not search).
#
# Usage: sh crates/hushtrace-c/install.sh --prefix /usr/local [--lib-dir DIR]
#   --lib-dir DIR  take libhushtrace.{so,a} from DIR instead of building them with
#                  `cargo build --release -p hushtrace-c` (into $CARGO_TARGET_DIR or target/).
# DESTDIR is honoured (staged installs for packaging).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=
libsrc=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --lib-dir) libsrc=$2; shift 2 ;;
        --lib-dir=*) libsrc=${1#--lib-dir=}; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
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
dest=${DESTDIR:-}$prefix
install -d "$dest/include" "$dest/lib/pkgconfig"
install -m 644 "$here/include/hushtrace.h" "$dest/include/hushtrace.h"
install -m 755 "$libsrc/libhushtrace.so" "$dest/lib/libhushtrace.so"
install -m 644 "$libsrc/libhushtrace.a" "$dest/lib/libhushtrace.a"
cat > "$dest/lib/pkgconfig/hushtrace.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: hushtrace
Description: Userspace tracer safe for real-time threads (no-syscall mode) and correct across fork()
URL: https://docs.rs/hushtrace
Version: ${version:-0.0.0}
Cflags: -I\${includedir}
Libs: -L\${libdir} -lhushtrace
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl
PC
echo "installed hushtrace $version under $dest (header, libhushtrace.so, libhushtrace.a, lib/pkgconfig/hushtrace.pc)"
