#!/usr/bin/env bash
# The night on one machine (docs/nightly.md): build, run the campaign,
# then judge every figure against the earlier nights. The trend runs even
# when a job failed, so that one broken job does not hide a regression
# elsewhere. Exit status: 0 when both passed; otherwise the campaign's
# status if it failed, else the trend's (non-zero on a regression), so
# that systemd or cron reports the night as failed.
#
# TOKENBED_CAMPAIGN names another campaign file (default
# experiments/nightly.yaml). Run as root: jobs on network namespaces and
# containers need it.
set -uo pipefail
cd "$(dirname "$0")/.."

campaign=${TOKENBED_CAMPAIGN:-experiments/nightly.yaml}

if ! make build; then
  echo "nightly: make build failed" >&2
  exit 3
fi
echo "nightly: $(date -u +%FT%TZ) campaign $campaign" >&2
bin/harness campaign run "$campaign"
night=$?
echo "nightly: $(date -u +%FT%TZ) campaign exit $night; trend" >&2
bin/harness trend
trend=$?
echo "nightly: $(date -u +%FT%TZ) trend exit $trend" >&2
if [ "$night" -ne 0 ]; then
  exit "$night"
fi
exit "$trend"
