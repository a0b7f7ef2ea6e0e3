#!/usr/bin/env bash
# The runtime's optional parts build without each other: the relay client (`relay`) and the
# control server (`control`) are cargo features, on by default, that an application can leave
# out. Checks the library with none, each alone, and all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
for features in enable enable,relay enable,control; do
    echo "== cargo check -p hushtrace --no-default-features --features $features"
    cargo check -q -p hushtrace --no-default-features --features "$features"
done
echo "== cargo check -p hushtrace --no-default-features (tracepoints compiled out)"
cargo check -q -p hushtrace --no-default-features
echo "features: ok"
