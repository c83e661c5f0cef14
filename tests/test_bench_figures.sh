#!/bin/sh
# The bench's figures and HTML report: the SVG of a made-up two-device run
# parses as XML with the expected panels, the HTML report is well-formed
# and self-contained; a saved run gives the report again (--from), a file
# option refuses what is not a regular file, only one output can be "-";
# a real two-device run (PoCL as two devices) gives a valid report and
# JSON on standard output; and, when a headless Chromium or Firefox is
# installed, both render with no text clipped or overlapping.  Output is
# TAP.
set -u
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-.}
py="python3 $srcdir/tests/bench_figures.py"
bench="$builddir/clinformer bench"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0

ok() {
    n=$((n + 1))
    echo "ok $n - $1"
}
not_ok() {
    n=$((n + 1))
    failed=1
    echo "not ok $n - $1"
    [ -f "$tmp/log" ] && sed 's/^/# /' "$tmp/log" | tail -20
}
check() { # name command...
    name=$1
    shift
    if "$@" >"$tmp/log" 2>&1; then
        ok "$name"
        sed 's/^/# /' "$tmp/log" | tail -3
    else
        not_ok "$name"
    fi
}

echo "1..12"
if ! command -v python3 >/dev/null 2>&1; then
    for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
        echo "ok $i # SKIP python3 is not installed"
    done
    exit 0
fi

mkdir "$tmp/made"
check figures_of_a_made_up_run_are_written "$builddir/tests/bench_figures" \
    "$tmp/made"
check svg_parses_with_the_expected_panels $py svg "$tmp/made/figures.svg" 2 2
made_html() {
    $py html "$tmp/made/report.html" 2 &&
        grep -q "<h2>Stages</h2>" "$tmp/made/report.html" &&
        grep -q "<td>0.143 (70%)</td>" "$tmp/made/report.html"
}
check html_is_well_formed_and_self_contained made_html

# --from: the report again from the saved run, on standard output.
from_html() {
    $bench --from "$tmp/made/run.json" --html - >"$tmp/from.html" \
        2>"$tmp/from.err" &&
        grep -q "== device" "$tmp/from.err" &&
        $py html "$tmp/from.html" 2 &&
        $bench --from "$tmp/made/run.json" --svg - >"$tmp/from.svg" \
            2>"$tmp/from.err" &&
        grep -q "== device" "$tmp/from.err" &&
        $py svg "$tmp/from.svg" 2 2
}
check from_rebuilds_report_and_svg_on_stdout_tables_to_stderr from_html

# --compare with --html: the report gains the comparison, each row with
# both devices and now/baseline (1.000 against itself).
# (device 0's label: its stable name where the JSON has it)
same0='<td class="t">(pocl:0|device 0)</td>'
compared_html() {
    $bench --from "$tmp/made/run.json" --compare "$tmp/made/run.json" \
        --html - >"$tmp/cmp.html" 2>/dev/null &&
        $py html "$tmp/cmp.html" 2 &&
        grep -q "<h2>Compared with an earlier run</h2>" "$tmp/cmp.html" &&
        grep -Eq "$same0$same0.*<td>1.000</td>" "$tmp/cmp.html"
}
check html_with_compare_has_both_devices_and_ratios compared_html

# Refused before anything is measured (status 2, as for bad usage).
refusals() {
    mkdir "$tmp/dir" && mkfifo "$tmp/fifo" || return 1
    for target in "$tmp/dir" "$tmp/fifo" /dev/null; do
        $bench --from "$tmp/made/run.json" --html "$target" \
            >/dev/null 2>"$tmp/refused.err"
        rc=$?
        if [ $rc -ne 2 ] || ! grep -q "not a regular file: refused" \
            "$tmp/refused.err"; then
            echo "--html $target: status $rc"
            cat "$tmp/refused.err"
            return 1
        fi
    done
    $bench --from "$tmp/made/run.json" --json - --html - \
        >/dev/null 2>"$tmp/two.err"
    [ $? -eq 2 ] && grep -q "only one of" "$tmp/two.err"
}
check html_refuses_what_is_not_a_regular_file_and_two_dashes refusals

# Options that say how to measure do not apply to a saved run.
from_measuring() {
    for opt in --peak --no-peak "--precision half" "--compression mean"; do
        # shellcheck disable=SC2086
        $bench --from "$tmp/made/run.json" $opt >/dev/null 2>"$tmp/m.err"
        rc=$?
        if [ $rc -ne 2 ] || ! grep -q -- "${opt%% *} does not apply" \
            "$tmp/m.err"; then
            echo "$opt: status $rc"
            cat "$tmp/m.err"
            return 1
        fi
    done
}
check from_refuses_options_that_measure from_measuring

# The two-device run, on a small shape matrix so that it stays fast.
two_devices() {
    POCL_DEVICES="pthread pthread" $bench --quick --device all \
        --n 64,128 --k 16 --d-model 32 --heads 2 --repeat 2 --trials 2 \
        --html "$tmp/r.html" --svg "$tmp/r.svg" --json - \
        >"$tmp/r.json" 2>"$tmp/r.err" || {
        tail -20 "$tmp/r.err"
        return 1
    }
    python3 -m json.tool "$tmp/r.json" >/dev/null &&
        echo "JSON on stdout: python3 -m json.tool accepts it" &&
        devices=$(python3 -c 'import json,sys
print(len(json.load(open(sys.argv[1]))["devices"]))' "$tmp/r.json") &&
        [ "$devices" -eq 2 ] && grep -q "== device" "$tmp/r.err"
}
# Two devices come from PoCL's POCL_DEVICES; under another implementation
# (scripts/check-runtimes.sh) there may be only one.
ndev=$(POCL_DEVICES="pthread pthread" "$builddir/clinformer" devices 2>/dev/null |
    grep -c '^\[[0-9]*\]' || true)
if [ "${ndev:-0}" -lt 2 ]; then
    for t in json_on_stdout html svg; do
        n=$((n + 1))
        echo "ok $n - quick_two_devices_$t # SKIP fewer than 2 OpenCL devices"
    done
else
check quick_two_devices_json_on_stdout two_devices
if [ -f "$tmp/r.html" ]; then
    check quick_two_devices_html $py html "$tmp/r.html" 2
    check quick_two_devices_svg $py svg "$tmp/r.svg" 2 2
else
    not_ok "quick_two_devices_html # no report"
    not_ok "quick_two_devices_svg # no figure"
fi
fi

# A real browser: Chromium runs the probe (texts against their viewport),
# Firefox can only show that the files render.
browser=
for b in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v $b >/dev/null 2>&1 && browser=$b && break
done
render_chromium() { # FILE
    $py probe "$1" "$tmp/probe.html" &&
        timeout 120 $browser --headless --no-sandbox --disable-gpu \
            --user-data-dir="$tmp/profile" --window-size=1200,900 \
            --dump-dom "file://$tmp/probe.html" >"$tmp/dom.html" \
            2>"$tmp/browser.err" &&
        $py verdict "$tmp/dom.html"
}
render_firefox() { # FILE
    timeout 120 $browser --headless --profile "$tmp/profile" \
        --screenshot "$tmp/shot.png" "file://$1" >/dev/null 2>&1 &&
        [ -s "$tmp/shot.png" ] && echo "$1 rendered (no text measured)"
}
if [ -z "$browser" ]; then
    for b in firefox firefox-esr; do
        command -v $b >/dev/null 2>&1 && browser=$b && break
    done
    mkdir -p "$tmp/profile"
    render=render_firefox
else
    render=render_chromium
fi
if [ -z "$browser" ]; then
    for t in svg html; do
        n=$((n + 1))
        echo "ok $n - ${t}_renders_in_a_browser # SKIP no headless browser (chromium or firefox) installed"
    done
else
    check "svg_renders_in_${browser}_with_no_text_clipped" $render \
        "$tmp/made/figures.svg"
    check "html_renders_in_${browser}_with_no_text_clipped" $render \
        "$tmp/made/report.html"
fi
exit $failed
