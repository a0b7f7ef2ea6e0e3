#!/usr/bin/env bash
# Creates (once) the Python virtualenv whose `perfetto` package holds Perfetto's own generated
# protobuf modules (perfetto.protos...), which the Perfetto conversion tests decode with.
#
#   bash ci/perfetto-venv.sh [VENV]     # default: target/perfetto-venv
#
# Prints the venv's python path on the last line. Idempotent: a venv that already imports the
# TracePacket module is kept.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec bash "$root/ci/tool-venv.sh" "${1:-$root/target/perfetto-venv}" \
    'import perfetto.protos.perfetto.trace.perfetto_trace_pb2 as m; m.TracePacket' \
    'perfetto>=0.7' 'protobuf>=4'
