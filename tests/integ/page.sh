#!/usr/bin/env bash
# page.sh — the page at GET / in a headless Chromium with no network: it is
# src/daemon/http/page.html verbatim, served as HTML under a Content-Security-
# Policy that loads nothing from elsewhere, and it references no other
# host; loaded while a simulator is sending, it draws the model's
# reliability diagram and U over time, polls /status by itself (the scored
# count it shows grows) and logs no error; a screenshot is left in
# $BUILDDIR/tests/integ/page.png for a human to look at. Then, driven over
# the DevTools protocol, the segments view: per segment key the worst values
# with the flagged ones marked and every value escaped; a click on a row
# draws that segment's reliability diagram, still selected after the next
# polls ($BUILDDIR/tests/integ/page-segments.png shows it). The label-free
# estimates' card shows the estimates and the priors of all classes.
. "$(dirname "$0")/lib.sh"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || skip_all "no $CHROMIUM (scripts/deps.sh installs chromium)"

# chrome ARGS...: headless, as root (hence no sandbox), a private profile,
# and no network: every request goes to a proxy that is not there, except
# loopback ones, which Chromium never sends to a proxy (unless told
# <-loopback>). Its stderr (noise, and the page's console with
# --enable-logging) goes to $work/chromium.log.
chrome() {
    timeout "$(scaled 120)" "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --no-first-run --no-default-browser-check --user-data-dir="$work/chromium" \
        --proxy-server=http://127.0.0.1:9 --enable-logging=stderr --v=0 "$@" 2>> "$work/chromium.log"
}

cat > "$work/calibd.conf" <<CONF
[daemon]
tick = 0.2
history_step = 0.2
ingest_pull = tcp://127.0.0.1:*
CONF
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
check "the bound HTTP address is in the endpoints file ($base)" '[[ "$base" == http://127.0.0.1:* ]]'

# --- a) the page as served
code=$(curl -sS -D "$work/page.h" -o "$work/page.html" -w '%{http_code}' --max-time "$(scaled 5)" "$base/")
tr -d '\r' < "$work/page.h" > "$work/headers"
check "GET / is 200 with Content-Type text/html
$(head -8 "$work/headers")" \
    '[ "$code" = 200 ] && grep -qi "^Content-Type: text/html" "$work/headers"'
check "GET / is src/daemon/http/page.html verbatim" 'cmp -s "$work/page.html" "$srcdir/src/daemon/http/page.html"'
csp=$(awk 'tolower($0) ~ /^content-security-policy:/ {sub(/^[^:]*: */, ""); print}' "$work/headers")
# every directive's sources are 'self' or 'none' (with 'unsafe-inline', and
# data: for images): nothing from another host, and default-src is 'self'
python3 - "$csp" <<'PY'
import sys
d = dict((w[0].lower(), w[1:]) for w in (p.split() for p in sys.argv[1].split(";")) if w)
ok = d.get("default-src") == ["'self'"]
for name, sources in d.items():
    allowed = {"'self'", "'none'", "'unsafe-inline'"} | ({"data:"} if name == "img-src" else set())
    ok = ok and all(s.lower() in allowed for s in sources)
sys.exit(0 if ok else 1)
PY
rc=$?
check "the Content-Security-Policy loads from 'self' only (inline script and style, data: images)
$csp" '[ $rc -eq 0 ]'
# outside comments, no attribute, url() or @import names another host
python3 - "$work/page.html" > "$work/external.txt" <<'PY'
import re, sys
html = re.sub(r"<!--.*?-->", "", open(sys.argv[1], encoding="utf-8").read(), flags=re.S)
pat = re.compile(r"""(?:\b(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*(?:https?:)?//"""
                 r"""|url\(\s*["']?\s*(?:https?:)?//|@import\s+["']?(?:url\()?\s*["']?(?:https?:)?//)""", re.I)
for m in pat.finditer(html):
    print(html[max(0, m.start() - 40):m.end() + 40].replace("\n", " "))
PY
check "the page references no other host (src=, href=, url(), @import)
$(cat "$work/external.txt")" '[ ! -s "$work/external.txt" ]'

# --- b) the page in Chromium while pairs arrive
# pairs first, so that the diagram has bins and the history points
"$SIMULATE" --endpoint ">$INGEST" --model m --k 10 --seed 7 --temperature 1.5 --count 5000 \
    --batch 50 --linger-ms "$LINGER_MS" 2> "$work/sim1.err"
check "the first pairs are scored" 'wait_for "$work/s1.json" "r[\"models\"][\"m\"][\"scored\"] >= 5000"'
# then a slow, long sender, still sending while Chromium polls
"$SIMULATE" --endpoint ">$INGEST" --model m --k 10 --seed 8 --temperature 1.5 --count 0 \
    --rate 500 --batch 10 2> "$work/sim2.err" &
sim=$!
track $sim
wait_for "$work/s2.json" "r['models']['m']['scored'] >= 5500" || bad "the slow sender's pairs arrive"
history_points() {
    curl -sS --max-time "$(scaled 5)" "$base/history?model=m" |
        python3 -c 'import json, sys; print(len(json.load(sys.stdin)["points"]))' 2> /dev/null || echo 0
}
wait_until '[ "$(history_points)" -ge 3 ]' || echo "# /history?model=m has $(history_points) points"
# overconfident (T* = 1.5): the trigger finds it miscalibrated and the loop
# publishes a temperature, events the history marks
check "the model is found miscalibrated and a temperature is published" \
    'wait_for "$work/s2.json" "r[\"models\"][\"m\"][\"loop\"][\"published\"] >= 1"'

# 5 minutes of the page's time (virtual: timers run at once, but each poll waits
# for calibd's real answer, so the polls span real ticks too): 150 polls of
# /status, 11 rounds of /history
chrome --virtual-time-budget=300000 --dump-dom "$base/" > "$work/dom.html"
rc=$?
status > "$work/s3.json"
python3 - "$work/dom.html" "$work/s3.json" > "$work/dom.txt" <<'PY'
import html.parser, json, sys
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.body, self.sections, self.svgs, self.banner, self.cur = {}, {}, [], None, None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "body":
            self.body = a
        elif tag == "section" and "model" in cls:
            self.cur = a.get("data-model")
            self.sections[self.cur] = a
        elif tag == "svg" and ("reliability" in cls or "history" in cls):
            self.svgs.append((self.cur, cls[0], int(a.get("data-points", "-1"))))
            if "history" in cls and self.cur == "m":
                self.marks = int(a.get("data-marks", "-1"))
                self.estimated = int(a.get("data-estimated", "-1"))
        elif tag == "p" and "trigger" in cls and self.cur == "m":
            self.trigger = True
        elif a.get("id") == "banner":
            self.banner = a
        elif tag == "tr" and "cs" in cls and self.cur == "m":
            self.cs_row = True
        elif tag == "p" and "wcs" in cls and self.cur == "m":
            self.wcs = True
        elif tag == "div" and "lfree" in cls and self.cur == "m":
            self.lfree = (int(a.get("data-predictions", "-1")), "hidden" in a)
        elif tag == "svg" and "priors" in cls and self.cur == "m":
            self.priors = int(a.get("data-classes", "-1"))
p = P()
p.feed(open(sys.argv[1], encoding="utf-8").read())
r = json.load(open(sys.argv[2]))
sec = p.sections.get("m", {})
svg = {kind: n for model, kind, n in p.svgs if model == "m"}
print("updates", p.body.get("data-updates", 0))
print("section", int("m" in p.sections))
print("scored", sec.get("data-scored", -1))
print("first", sec.get("data-first-scored", -1))
print("status", r["models"]["m"]["scored"])
print("reliability", svg.get("reliability", -1))
print("history", svg.get("history", -1))
print("banner", int(p.banner is not None and "hidden" not in p.banner))
print("cs", int(getattr(p, "cs_row", False)))
print("wcs", int(getattr(p, "wcs", False)))
print("marks", getattr(p, "marks", -1))
print("estimated", getattr(p, "estimated", -1))
print("trigger", int(getattr(p, "trigger", False)))
lf = getattr(p, "lfree", (-1, True))
print("lfree", -1 if lf[1] else lf[0])
print("priors", getattr(p, "priors", -1))
PY
val() { awk -v k="$1" '$1 == k {print $2}' "$work/dom.txt"; }
echo "# chromium exit $rc; the page after 5 minutes (virtual): $(tr '\n' ' ' < "$work/dom.txt")"
check "Chromium loads the page and dumps its DOM (exit $rc)" '[ $rc -eq 0 ] && grep -q "<section class=\"model\"" "$work/dom.html"'
check "the page has a section for model m" '[ "$(val section)" = 1 ]'
check "its reliability diagram plots bins (data-points $(val reliability))" '[ "$(val reliability)" -gt 0 ]'
check "its history plots points of U (data-points $(val history))" '[ "$(val history)" -gt 0 ]'
check "the page updated itself from /status (data-updates $(val updates) >= 2)" '[ "$(val updates)" -ge 2 ]'
check "the scored count shown grew while the sender sent ($(val first) at the first render, $(val scored) at the last)" \
    '[ "$(val scored)" -gt "$(val first)" ]'
check "and is one calibd reported (at most $(val status), the count after)" '[ "$(val scored)" -le "$(val status)" ]'
check "no unreachable banner" '[ "$(val banner)" = 0 ]'
check "the anytime-valid interval (confidence sequence) is shown beside the fixed-time one" '[ "$(val cs)" = 1 ]'
check "and the window's, per period" '[ "$(val wcs)" = 1 ]'
check "the miscalibration trigger is shown" '[ "$(val trigger)" = 1 ]'
check "U over time marks the loop's events ($(val marks) marks: the publish at least)" \
    '[ "$(val marks)" -ge 1 ]'
check "U over time draws the label-free estimate beside the realized U ($(val estimated) points)" \
    '[ "$(val estimated)" -gt 0 ]'
check "the label-free estimates are shown, of the newest predictions ($(val lfree))" \
    '[ "$(val lfree)" -gt 0 ]'
check "with the class priors of all 10 classes ($(val priors))" '[ "$(val priors)" = 10 ]'
check "no uncaught script error or load the policy refused in the console
$(grep -E 'CONSOLE.*(Uncaught|Refused|Content Security Policy)' "$work/chromium.log" | head -5)" \
    '! grep -qE "CONSOLE.*(Uncaught|Refused|Content Security Policy)" "$work/chromium.log"'

# --- c) a screenshot, for a human
chrome --virtual-time-budget=10000 --hide-scrollbars --window-size=1280,2000 \
    --screenshot="$work/page.png" "$base/" > /dev/null
check "a screenshot of the page is produced ($(stat -c %s "$work/page.png" 2> /dev/null || echo no) bytes)" \
    '[ -s "$work/page.png" ] && [ "$(head -c 8 "$work/page.png" | od -An -tx1 | tr -d " \n")" = 89504e470d0a1a0a ]'
mkdir -p "$BUILDDIR/tests/integ" && cp "$work/page.png" "$BUILDDIR/tests/integ/page.png" 2> /dev/null &&
    echo "# the screenshot: $BUILDDIR/tests/integ/page.png"

# --- d) the segments view, clicked
# model seg: values v0..v39 of key "segment", v0..v2 overconfident (flagged
# after the tick), and a key "tenant" with one value that is markup
"$SIMULATE" --endpoint ">$INGEST" --model seg --count 20000 --batch 100 --sigma 3 --segments 40 \
    --miscal-segments 3 --label-delay 0.2 --linger-ms "$LINGER_MS" 2> "$work/sim3.err"
odd='<b>x</b> & "q" '\''é'\'
ODD=$odd send_py "$PULL" <<'PY'
import os
send("seg", {"v": 1, "type": "pred", "id": "odd", "seg": {"tenant": os.environ["ODD"]},
             "logits": [0.0] * 10, "y": 3})
PY
# model few: 5 pairs, 4 right and sure, 1 wrong and sure (Brier 0, 0, 0,
# 0, 2: a normal interval of [-0.38, 1.18] reaches below 0), and 2 records
# calibd rejects, which its card must show
send_py "$PULL" <<'PY'
for i in range(5):
    top = i if i < 4 else i + 1
    send("few", {"v": 1, "type": "pred", "id": "f%d" % i,
                 "logits": [40.0 if j == top else 0.0 for j in range(10)], "y": i})
send("few", {"v": 1, "type": "pred", "id": "bad1", "logits": [float("nan")] + [0.0] * 9, "y": 1})
send("few", {"v": 1, "type": "pred", "id": "bad2", "logits": [0.0] * 10, "y": 12})
PY
seg() { echo "r['models']['seg']['segments']['by_key']"; }
check "model seg is scored and its three overconfident values are flagged" \
    'wait_for "$work/s4.json" "r[\"models\"][\"seg\"][\"scored\"] == 20001 and $(seg)[\"segment\"][\"flagged\"] >= 3 and \"tenant\" in $(seg) and r[\"models\"][\"few\"][\"scored\"] == 5 and sum(r[\"models\"][\"few\"][\"rejected\"].values()) == 2"'

# Chromium with the DevTools protocol on a pipe (its fds 3 and 4: fifos
# here), which the python below drives: it loads the page, waits for what
# it expects (the page polls /status every 2 s in real time), clicks, and
# writes what it saw to $work/cdp.json
mkfifo "$work/cdp.in" "$work/cdp.out"
log_from=$(( $(stat -c %s "$work/chromium.log") + 1 ))
chrome --remote-debugging-pipe 3< "$work/cdp.in" 4> "$work/cdp.out" &
browser=$!
track $browser
python3 - "$work/cdp.in" "$work/cdp.out" "$base/" "$(scaled "$WAIT_CEILING")" "$odd" \
    "$work/cdp.json" "$work/segments.png" <<'PY'
import base64, json, os, sys, time
fifo_in, fifo_out, url, ceiling, odd, out_json, png = sys.argv[1:]
cmd = open(fifo_in, "wb", buffering=0)  # in this order: Chromium opens fd 3 first
ans = open(fifo_out, "rb", buffering=0)
buf, n, out = b"", 0, {"sent": odd}

class CDPError(Exception):
    pass

# call METHOD [SESSION] PARAMS: its result; messages are JSON ended by NUL,
# events are skipped
def call(method, session=None, **params):
    global buf, n
    n += 1
    msg = {"id": n, "method": method, "params": params}
    if session:
        msg["sessionId"] = session
    cmd.write(json.dumps(msg).encode() + b"\0")
    while True:
        while b"\0" not in buf:
            chunk = os.read(ans.fileno(), 1 << 16)
            if not chunk:
                raise SystemExit("# Chromium closed the DevTools pipe")
            buf += chunk
        line, buf = buf.split(b"\0", 1)
        m = json.loads(line)
        if m.get("id") == n:
            if "error" in m:
                raise CDPError(f"{method}: {m['error']}")
            return m["result"]

def js(expr):
    return call("Runtime.evaluate", session, expression=expr, returnByValue=True)["result"].get("value")

# what the page shows of model seg's segments (null before it renders them)
PROBE = """(() => {
  const sec = document.querySelector('section[data-model="seg"]');
  const svg = sec && sec.querySelector(".segrel svg.reliability");
  return sec && {
    updates: +document.body.dataset.updates,
    rows: [...sec.querySelectorAll("table.segments tr[data-key]")].map(tr => ({
      key: tr.dataset.key, value: "value" in tr.dataset ? tr.dataset.value : null,
      text: tr.cells[0].textContent, elements: tr.cells[0].children.length,
      flagged: tr.classList.contains("flagged") && tr.cells[tr.cells.length - 1].textContent.includes("flagged"),
      on: tr.classList.contains("on") })),
    title: sec.querySelector(".segsel").textContent,
    points: svg ? +svg.getAttribute("data-points") : -1 };
})()"""

# until WHAT OK: the page's state once OK holds of it, or the last after
# the ceiling
def until(what, ok):
    end = time.monotonic() + float(ceiling)
    while True:
        try:
            p = js(PROBE)
        except CDPError:  # between documents
            p = None
        if p and ok(p):
            return p
        if time.monotonic() > end:
            print(f"# waited {ceiling} s in vain for {what}; the page shows {json.dumps(p)}")
            return p or {"rows": [], "title": "", "points": -1, "updates": 0}
        time.sleep(0.05)

def rows(p, key):
    return [r for r in p["rows"] if r["key"] == key]

def selected(p):
    return [[r["key"], r["value"]] for r in p["rows"] if r["on"]]

# click KEY VALUE: a click on the first cell of that row
def click(key, value):
    js(f"""[...document.querySelectorAll('section[data-model="seg"] table.segments tr[data-key]')]
        .find(tr => tr.dataset.key === {json.dumps(key)} && tr.dataset.value === {json.dumps(value)})?.cells[0].click()""")

try:
    target = call("Target.createTarget", url="about:blank")["targetId"]
    session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    call("Emulation.setDeviceMetricsOverride", session, width=1280, height=1000, deviceScaleFactor=1, mobile=False)
    call("Page.navigate", session, url=url)
    p = until("the flagged rows and the tenant row",
              lambda p: sum(r["flagged"] for r in p["rows"]) >= 3 and rows(p, "tenant"))
    seg = rows(p, "segment")
    out["rows"] = len(seg)
    out["other"] = bool(seg) and seg[-1]["value"] is None and seg[-1]["text"] == "(other)"
    out["flagged"] = " ".join(sorted(r["value"] for r in seg if r["flagged"]))
    out["worst"] = " ".join(sorted(r["value"] for r in seg[:3]))
    out["odd"] = [[r["value"], r["text"], r["elements"]] for r in rows(p, "tenant") if r["value"] is not None]
    out["points_before"] = p["points"]
    v = out["clicked"] = next((r["value"] for r in seg if r["flagged"]), None)
    click("segment", v)
    p = until(f"segment = {v} selected and drawn", lambda p: selected(p) == [["segment", v]] and p["points"] > 0)
    out["selected"], out["points"], out["title"] = selected(p), p["points"], p["title"]
    u = p["updates"]
    p = until("two polls of /status", lambda p: p["updates"] >= u + 2)
    out["polls"], out["kept"], out["kept_points"] = p["updates"] - u, selected(p), p["points"]
    click("tenant", odd)
    p = until("the tenant row selected", lambda p: selected(p) == [["tenant", odd]] and p["points"] > 0)
    out["odd_selected"], out["odd_title"] = selected(p) == [["tenant", odd]], p["title"]
    box = js("""(e => { e.scrollIntoView(); const r = e.getBoundingClientRect();
      return { x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height, scale: 1 }; })(
      document.querySelector('section[data-model="seg"] .segs'))""")
    shot = call("Page.captureScreenshot", session, format="png", clip=box)
    with open(png, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    # at 1,280 px: nothing overflows sideways, no interval of a score
    # that is never negative shown below 0, model few's rejections shown,
    # and the models ordered by attention (alarms, then pairs): few last
    out["layout"] = js("""(() => {
      const few = document.querySelector('section[data-model="few"]'), d = document.documentElement;
      return { page: d.scrollWidth - d.clientWidth,
        events: [...document.querySelectorAll("ul.events")].filter(u => u.scrollWidth > u.clientWidth + 1).length,
        negative: [...document.querySelectorAll("section.model > .figs table")].some(t => /\\[-/.test(t.textContent)),
        few_figs: few ? few.querySelector(":scope > .figs table").textContent : "",
        rejected: few && few.querySelector(".rejected") ? few.querySelector(".rejected").textContent : "",
        order: [...document.querySelectorAll("section.model")].map(s => s.dataset.model) };
    })()""")
    call("Browser.close")
finally:
    with open(out_json, "w") as f:
        json.dump(out, f)
PY
rc=$?
ends_within $browser "$(scaled 30)" && wait $browser
crc=$?
echo "# the page over DevTools (python exit $rc, Chromium exit $crc): $(cat "$work/cdp.json" 2> /dev/null)"
cdp() { json_get "$work/cdp.json" "$1" 2> /dev/null; }
check "the segments view: key segment's 10 worst values, then (other)" \
    '[ "$(cdp "r[\"rows\"] == 11 and r[\"other\"]")" = True ]'
check "the three flagged values are marked flagged, ranked first ($(cdp "r['flagged']"))" \
    '[ "$(cdp "r[\"flagged\"] == r[\"worst\"] == \"v0 v1 v2\"")" = True ]'
check "a value that is markup ($odd) is shown as text" \
    '[ "$(cdp "r[\"odd\"] == [[r[\"sent\"], r[\"sent\"], 0]]")" = True ]'
check "before a click no segment's diagram is drawn (data-points $(cdp "r['points_before']"))" \
    '[ "$(cdp "r[\"points_before\"]")" = 0 ]'
check "a click on flagged row $(cdp "r['clicked']") selects it and draws its reliability diagram ($(cdp "r['points']") points)" \
    '[ "$(cdp "r[\"selected\"] == [[\"segment\", r[\"clicked\"]]] and r[\"points\"] > 0 and r[\"title\"].startswith(\"Reliability of segment = \" + r[\"clicked\"])")" = True ]'
check "the selection and its diagram stay through $(cdp "r['polls']") polls of /status" \
    '[ "$(cdp "r[\"polls\"] >= 2 and r[\"kept\"] == r[\"selected\"] and r[\"kept_points\"] == r[\"points\"]")" = True ]'
check "selecting the markup value titles its diagram with it as text" \
    '[ "$(cdp "r[\"odd_selected\"] and r[\"odd_title\"].startswith(\"Reliability of tenant = \" + r[\"sent\"] + \" (since\")")" = True ]'
check "Chromium closes (exit $crc) and logged no uncaught script error meanwhile
$(tail -c +"$log_from" "$work/chromium.log" | grep -E 'CONSOLE.*(Uncaught|Refused|Content Security Policy)' | head -5)" \
    '[ $crc -eq 0 ] && ! tail -c +"$log_from" "$work/chromium.log" | grep -qE "CONSOLE.*(Uncaught|Refused|Content Security Policy)"'
check "at 1,280 px nothing overflows sideways: the page, each events list ($(cdp "r['layout']['page'], r['layout']['events']"))" \
    '[ "$(cdp "r[\"layout\"][\"page\"] <= 0 and r[\"layout\"][\"events\"] == 0")" = True ]'
check "no Brier or log interval is shown below 0, a model of 5 pairs included ($(cdp "r['layout']['few_figs'][:160]"))" \
    '[ "$(cdp "not r[\"layout\"][\"negative\"] and \"0.4 [0,\" in r[\"layout\"][\"few_figs\"]")" = True ]'
check "model few's card shows its 2 rejected records by reason ($(cdp "r['layout']['rejected']"))" \
    '[ "$(cdp "r[\"layout\"][\"rejected\"].startswith(\"2 records rejected\") and \"nonfinite 1\" in r[\"layout\"][\"rejected\"] and \"label_range 1\" in r[\"layout\"][\"rejected\"]")" = True ]'
check "the models in order of attention, the 5-pair model last ($(cdp "r['layout']['order']"))" \
    '[ "$(cdp "r[\"layout\"][\"order\"][-1] == \"few\" and len(r[\"layout\"][\"order\"]) == 3")" = True ]'
cp "$work/segments.png" "$BUILDDIR/tests/integ/page-segments.png" 2> /dev/null &&
    echo "# the segments view: $BUILDDIR/tests/integ/page-segments.png"

kill $sim 2> /dev/null
wait $sim 2> /dev/null
stop_calibd
rc=$?
check "calibd exits 0 on SIGTERM" '[ $rc -eq 0 ]'
finish
