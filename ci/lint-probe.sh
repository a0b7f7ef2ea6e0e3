#!/usr/bin/env bash
# Shows every entry of crates/hushtrace/clippy.toml's disallowed-methods firing: clippy runs on
# ci/lint-probe (one call of each disallowed method, in a module that denies the lint) with that
# configuration, and this fails unless the set of methods clippy reports equals the set the
# file lists. An entry whose path does not resolve, or that clippy never matches, checks nothing
# in the runtime; this is how such an entry shows.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
listed="$(grep -o 'path = "[^"]*"' crates/hushtrace/clippy.toml | sed 's/path = "\(.*\)"/\1/' | sort -u)"
out="$(CLIPPY_CONF_DIR="$root/crates/hushtrace" CARGO_TARGET_DIR="$root/target/lint-probe" \
    cargo clippy --quiet --manifest-path ci/lint-probe/Cargo.toml --message-format=short 2>&1 || true)"
fired="$(grep -o 'use of a disallowed method `[^`]*`' <<<"$out" | sed 's/.*`\(.*\)`/\1/' | sort -u || true)"
if [ -z "$fired" ]; then
    echo "ci/lint-probe.sh: clippy reported nothing on the probe:" >&2
    echo "$out" >&2
    exit 1
fi
missing="$(comm -23 <(echo "$listed") <(echo "$fired"))"
extra="$(comm -13 <(echo "$listed") <(echo "$fired"))"
if [ -n "$missing" ] || [ -n "$extra" ]; then
    [ -n "$missing" ] && printf 'listed in clippy.toml but never fired on the probe:\n%s\n' "$missing" >&2
    [ -n "$extra" ] && printf 'fired but not listed (the probe and the list disagree):\n%s\n' "$extra" >&2
    grep -E "^(warning|error)" <<<"$out" | grep -v "disallowed method" | head -20 >&2 || true
    exit 1
fi
echo "ci/lint-probe.sh: all $(wc -l <<<"$listed") disallowed methods fire"
