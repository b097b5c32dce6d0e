#!/usr/bin/env bash
# Screenshots of every HTML report in headless Chromium, to look at
# (docs/reports.md: no overlapping series without a visual distinction, tables not cut,
# the title not broken inside a word), to look at by eye. The automatic check
# of the same pages in headless Chromium is the test
# every_page_renders_in_headless_chromium in crates/fallow-cli/tests/integration/charts.rs
# (docs/reports.md); .ci/run installs chromium for it.
#
# Usage: bash scripts/screenshot-reports.sh [FALLOW_BINARY] [OUT_DIR]
#   (defaults: target/release/fallow, /tmp/fallow-screens); needs `chromium`
#   (apt-get install -y chromium). Writes OUT_DIR/{demo,compare,pareto,energy}-{1400,800}.png.
set -euo pipefail
fallow="${1:-target/release/fallow}"
out="${2:-/tmp/fallow-screens}"
command -v chromium >/dev/null || { echo "skip: no chromium (apt-get install -y chromium)"; exit 2; }
mkdir -p "$out"
cd "$out"
"$fallow" demo --requests 20000 --out demo >/dev/null
t=demo/trace.csv
"$fallow" compare "$t" --bg size --html compare.html >/dev/null
"$fallow" pareto "$t" --bg size --bg-size 1MiB --policy fixed-wait --policy deadline \
    --policy oracle --html pareto.html >/dev/null
"$fallow" energy "$t" --policy timeout:t=10s --policy adaptive --policy predictive \
    --html energy.html >/dev/null
cp demo/report.html demo.html
for page in demo compare pareto energy; do
    for w in 1400 800; do
        chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --window-size="$w,3000" --screenshot="$out/$page-$w.png" "file://$out/$page.html" \
            2>/dev/null
    done
done
ls -1 "$out"/*.png
