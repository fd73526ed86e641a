#!/usr/bin/env bash
# commtap report, loaded in headless Chromium as a person's browser would: a 4-rank training
# loop whose rank 2 computes 20 ms longer per step, run as two pretend hosts (each rank in a UTS
# namespace of its own, named h0 or h1, with COMMTAP_TEST_NODES=2 so that the link probes run
# between them), traced with a 200 ms COMMTAP_INTERVAL and analyzed in 0.5 s windows. In the
# DOM Chromium built from the page: time axes with ticks, a value scale, one heat-map cell per
# rank and window, the message and probe link matrices (latency in us, throughput in MB/s), the
# call sites' lines, and the finding. A job of one window is drawn as points. Chromium's network
# log shows no request but the page itself, and the page's Content-Security-Policy keeps an
# image from the network from loading. The checks fail on a page without its heat map or with
# a request. A Perfetto export parses in Chromium's JavaScript engine.
source "$(dirname "$0")/common.sh"

BROWSER=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$BROWSER" ]; then
  echo "skipped: no chromium (scripts/install-deps installs it)"
  exit 77
fi

# browse PAGE NETLOG [more flags]: the DOM Chromium built from PAGE (a file here), on stdout.
# A profile of its own and no background networking, so that the network log holds what the
# page asked for, not Chromium's own update and sync traffic.
browse() {
  local page=$1 netlog=$2
  shift 2
  timeout 60 "$BROWSER" --headless=new --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$WORK/profile" --log-net-log="$netlog" "$@" \
    --dump-dom "file://$WORK/$page" 2>>"$WORK/chromium.err"
}

# The markup of <svg id=ID> in a DOM dump.
svg_of() { perl -0777 -ne 'print $1 if /(<svg id="'"$1"'".*?<\/svg>)/s' "$2"; }
# How often PATTERN occurs in the text on stdin.
occurrences() { { grep -o "$1" || true; } | wc -l; }
# The tick labels of every axis of class CLASS in the markup on stdin, one per line.
tick_labels() {
  perl -0777 -ne 'while (/<g class="'"$1"'">(.*?)<\/g>/sg) { my $a = $1;
    print "$1\n" while $a =~ /class="tick-label"[^>]*>([^<]*)</g; print "--\n" }'
}

# check_dom DOM RANKS WINDOWS HOSTS: the drawn elements of a report; prints what is wrong and
# returns 1 (a subshell: `bad` ends it). WINDOWS: the analysis windows expected, or "several"
# (at least 3).
bad() {
  echo "$*"
  exit 1
}
check_dom() (
  dom=$1 ranks=$2 windows=$3 hosts=$4
  heat=$(svg_of lateness-heatmap "$dom")
  chart=$(svg_of lateness-chart "$dom")
  sites=$(svg_of site-chart "$dom")
  [ -n "$heat" ] || bad "no lateness heat map"
  [ -n "$chart" ] || bad "no lateness chart"
  [ -n "$sites" ] || bad "no call-site chart"
  rows=$(sed -n 's/.*data-rows="\([0-9]*\)".*/\1/p' <<<"$heat" | head -1)
  cols=$(sed -n 's/.*data-windows="\([0-9]*\)".*/\1/p' <<<"$heat" | head -1)
  cells=$(occurrences 'class="heat-cell"' <<<"$heat")
  [ "$rows" == "$ranks" ] || bad "heat map rows: $rows, not $ranks"
  if [ "$windows" == several ]; then
    [ "$cols" -ge 3 ] || bad "heat map of $cols windows"
  else
    [ "$cols" == "$windows" ] || bad "heat map of $cols windows, not $windows"
  fi
  [ "$cells" == $((ranks * cols)) ] || bad "$cells heat-map cells for $ranks x $cols"
  grep -q 'class="legend"' <<<"$heat" || bad "no colour legend on the heat map"
  # Every time chart has a time axis in seconds with ticks, and the line charts a value scale.
  for svg in "$heat" "$chart" "$sites"; do
    labels=$(tick_labels time-axis <<<"$svg" | grep -c -v -- -- || true)
    [ "$labels" -ge 2 ] || bad "a time axis with $labels tick labels"
    grep -q "time since the job's start (s)" <<<"$svg" || bad "a time axis unlabelled"
  done
  for svg in "$chart" "$sites"; do
    labels=$(tick_labels value-axis <<<"$svg" | grep -c -v -- -- || true)
    [ "$labels" -ge 3 ] || bad "a value scale of $labels ticks"
  done
  # A value per rank and window with data: a point each, lines between them.
  points=$(occurrences 'class="point"' <<<"$chart")
  lines=$(occurrences 'class="lateness-line"' <<<"$chart")
  [ "$lines" == "$ranks" ] || bad "$lines lateness lines for $ranks ranks"
  if [ "$windows" == 1 ]; then
    [ "$points" == "$ranks" ] || bad "one window: $points points for $ranks ranks"
  else
    [ "$points" -ge $((ranks * 3)) ] || bad "$points lateness points"
    grep -q 'class="lateness-line" d="M[0-9.,]* L' <<<"$chart" ||
      bad "no lateness line joins two windows"
  fi
  lines=$(occurrences 'class="site-line"' <<<"$sites")
  [ "$lines" -ge 1 ] || bad "no call-site lines"
  grep -q "MPI_Allreduce from main" <<<"$sites" || bad "no MPI_Allreduce from main"
  [ "$(occurrences 'class="point"' <<<"$sites")" -ge 1 ] || bad "no call-site points"
  if [ "$hosts" == 2 ]; then
    for id in link-messages link-probe-latency link-probe-throughput; do
      cells=$(svg_of "$id" "$dom" | occurrences 'class="link-cell"')
      [ "$cells" == 2 ] || bad "$id: $cells measured cells, not 2 (h0 -> h1, h1 -> h0)"
    done
    svg_of link-probe-latency "$dom" | grep -q '[0-9] us<' || bad "probe latency not in us"
    svg_of link-probe-throughput "$dom" | grep -q '[0-9] MB/s<' ||
      bad "probe throughput not in MB/s"
    svg_of link-messages "$dom" | grep -q '[0-9] us<' || bad "message latency not in us"
  fi
  points=$(occurrences 'class="point"' <<<"$chart")
  echo "$rows rows x $cols windows, $points points, $lines call sites"
)

# requests NETLOG: the URLs of the requests made for the page, one per line. file:// loads do
# not go through the network stack, so a page that asks for nothing leaves no request in the
# log; Chromium's own (its update, clock and account checks, left even with background
# networking off) have the initiator "not an origin" and are not the page's.
requests() {
  grep -q '"polledData"' "$1" || fail "no complete network log $1: $(tail -3 "$WORK/chromium.err")"
  { grep '"initiator":' "$1" || true; } | { grep -v '"initiator":"not an origin"' || true; } |
    { grep -o '"url":"[^"]*"' || true; } | sed 's/^"url":"//; s/"$//' | sort -u
}

# ---- A job of several windows on two pretend hosts -----------------------------------------------
hosts=1
if unshare --uts true 2>/dev/null; then
  hosts=2
  cat >as_host.sh <<'EOF'
#!/bin/sh
# Runs "$@" in a UTS namespace of its own, named h<MPI rank mod 2>.
exec unshare --uts sh -c 'hostname "h$((PMI_RANK % 2))" && exec "$@"' sh "$@"
EOF
  chmod +x as_host.sh
  launch=("$WORK/as_host.sh")
else
  echo "note: unshare --uts is not allowed here (needs root): one host, link matrices not checked"
  launch=()
fi
COMMTAP_DIR=job COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 COMMTAP_INTERVAL=200 COMMTAP_PROBE_INTERVAL=1 \
  COMMTAP_TEST_NODES=$hosts run_preloaded 4 "${launch[@]}" "$PROGRAMS/toy_train" 150 1024 2 20000 \
  >/dev/null
expect_equal "$hosts" "$(db_query job "SELECT count(DISTINCT host) FROM ranks")" \
  "hosts in the trace"
"$CLI" report job --window 0.5 --min-lateness-ms 5 -o report.html 2>report.err ||
  fail "commtap report failed: $(cat report.err)"
grep -q "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"" report.html ||
  fail "no Content-Security-Policy"
browse report.html net.json >dom.html
grep -q "slow_rank" dom.html || fail "the finding is not on the page"
grep -q "rank 2 (h0)" dom.html || [ "$hosts" == 1 ] || fail "rank 2 (h0) not named"
drawn=$(check_dom dom.html 4 several "$hosts") || fail "report: $drawn"
pass "report of 4 ranks on $hosts host(s): $drawn"
others=$(requests net.json)
[ -z "$others" ] || fail "the report asked for: $others"
pass "the report makes no network request"

# The checks can fail: without the heat map ...
perl -0777 -pe 's/<svg id=.lateness-heatmap.*?<\/svg>//s' report.html >no-heat.html
browse no-heat.html net-no-heat.json >no-heat-dom.html
if found=$(check_dom no-heat-dom.html 4 several "$hosts"); then
  fail "a report without its heat map passed: $found"
fi
pass "without the heat map the check fails ($found)"
# ... and with an image from the network, once without the page's policy (Chromium asks for it
# and the log shows it) and once with it (the policy refuses it: no request).
image="<img src='http://127.0.0.1:9/commtap-test.png' alt=''>"
sed "s#<body>#<body>$image#; s#<meta http-equiv=[^>]*>##" report.html >leaky.html
browse leaky.html net-leaky.json >/dev/null
requests net-leaky.json | grep -q "^http://127.0.0.1:9/commtap-test.png$" ||
  fail "a page that loads an image shows no request: the network check cannot fail"
sed "s#<body>#<body>$image#" report.html >blocked.html
browse blocked.html net-blocked.json >/dev/null
others=$(requests net-blocked.json)
[ -z "$others" ] || fail "the Content-Security-Policy let through: $others"
pass "a request is seen in the network log, and the page's policy refuses one"

# ---- A job of one window: points ---------------------------------------------------------------
COMMTAP_DIR=short COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 \
  run_preloaded 4 "$PROGRAMS/toy_train" 60 1024 2 5000 >/dev/null
"$CLI" report short -o short.html 2>report.err || fail "commtap report failed: $(cat report.err)"
browse short.html net-short.json >short-dom.html
drawn=$(check_dom short-dom.html 4 1 1) || fail "one-window report: $drawn"
pass "a job of one window: $drawn"

# ---- A Perfetto export, parsed by Chromium's JavaScript engine -----------------------------------
# ui.perfetto.dev cannot be reached from a test; what it needs first is JSON that a browser's
# JSON.parse takes. A local page holds a copy and counts the slices into its DOM.
"$CLI" export --format perfetto job -o job.json 2>export.err || fail "export: $(cat export.err)"
read -r _ slices _ <<<"$("$PROGRAMS/perfetto_check" job.json "$hosts" 4)" ||
  fail "perfetto_check failed"
{
  echo "<!DOCTYPE html><html><body><p id='out'>not parsed</p>"
  echo "<script type='application/json' id='trace'>"
  sed 's#</#<\\/#g' job.json # "</script" must not end the element; "<\/" is the same JSON
  echo "</script><script>"
  echo "const t = JSON.parse(document.getElementById('trace').textContent);"
  echo "document.getElementById('out').textContent = 'slices ' +"
  echo "  t.traceEvents.filter(e => e.ph === 'X').length + ' events ' + t.traceEvents.length;"
  echo "</script></body></html>"
} >perfetto.html
browse perfetto.html net-perfetto.json >perfetto-dom.html
grep -q "<p id=\"out\">slices $slices events [0-9]*</p>" perfetto-dom.html ||
  fail "Chromium read the export as: $(grep -o '<p id="out">[^<]*' perfetto-dom.html)" \
    "(expected $slices slices)"
pass "Chromium's JSON.parse reads the Perfetto export: $slices slices"
