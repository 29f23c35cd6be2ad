"""Drives headless Chromium (Selenium, Debian's chromium-driver) through the coordinator's web
view of a live job and checks what a person would look at; screenshots go to OUT_DIR.

    web_view_check.py URL JOB TOKEN SUSPECT_STAGE SUSPECT_RANK WORLD OUT_DIR
"""
import json
import os
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

url, job, token, stage, rank, world, out = sys.argv[1:8]
rank, world = int(rank), int(world)


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


opts = webdriver.ChromeOptions()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--window-size=1500,1900", f"--user-data-dir={out}/chromium-profile"]:
    opts.add_argument(a)
opts.binary_location = "/usr/bin/chromium"
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
driver.set_page_load_timeout(30)


def js(expr):
    return driver.execute_script("return " + expr)


def wait_for(what, expr, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = js(expr)
        if v:
            return v
        time.sleep(0.25)
    driver.save_screenshot(os.path.join(out, "failed.png"))
    logs = [e["message"] for e in driver.get_log("browser")]
    status = js("document.getElementById('status').textContent")
    fail(f"{what}: not seen in {timeout} s ({expr}); the page says {status!r}; "
         f"browser log: {logs[-5:]}")


try:
    # Before any answer the page says it is loading, never "Pick a job." (a screenshot taken at
    # once of #job=NAME used to show that).
    page = urllib.request.urlopen(f"{url}/", timeout=10).read().decode()
    if "Pick a job" in page:
        fail("the page as served says 'Pick a job.' before its script has run")
    # Without the token the API refuses and the page asks for one.
    driver.get(f"{url}/")
    wait_for("the token form", "!document.getElementById('token-form').hidden")
    status = js("document.getElementById('status').textContent")
    if "token" not in status:
        fail(f"the page's status line does not say a token is missing: {status!r}")
    driver.save_screenshot(os.path.join(out, "web_view_token.png"))

    driver.get(f"{url}/#job={job}&token={token}")
    wait_for("the verdict", "window.sfView.suspects && document.getElementById('verdict')"
             ".dataset.label === 'CLEAR'")
    banner = js("document.getElementById('verdict').textContent")
    if f"{stage} on rank {rank}" not in banner:
        fail(f"the verdict banner does not name ({stage}, {rank}): {banner!r}")
    # Issue 30, item 10: the current window is named (and, with profiled steps left out of its
    # span, says how many: sfctl_render_test and the app's windowSpan share the wording).
    window = js("document.getElementById('window').textContent")
    if not window.startswith("Current window of "):
        fail(f"the current window is not named: {window!r}")
    # Let every chart draw at least once more with the job's data.
    start = js("window.sfView.refreshed")
    wait_for("a refresh", f"window.sfView.refreshed >= {start + 1}")
    charts = js("Object.keys(window.sfView.charts).sort()")
    want = ["frontier-chart", "heatmap-chart", "max-chart", "mean-chart", "timeline-chart"]
    if charts != want:
        fail(f"charts drawn: {charts}, want {want}")
    if js("Object.keys(Chart.instances).length") < len(want):
        fail("Chart.js holds fewer chart instances than the page drew")
    # The heatmap's hottest cell is the suspect.
    cells = js("window.sfView.charts['heatmap-chart'].data.datasets[0].data")
    stages = js("window.sfView.heatStages")
    if not cells:
        fail("the heatmap is empty")
    top = max(cells, key=lambda c: c["v"])
    if (stages[top["y"]], top["x"]) != (stage, rank):
        fail(f"the heatmap's hottest cell is ({stages[top['y']]}, {top['x']}), not ({stage}, {rank})")
    # The frontier chart stacks one dataset per stage over the held steps, and per step its
    # stack is the step's exposed time (ms) as the API gives it.
    frontier = js("window.sfView.charts['frontier-chart'].data")
    if [d["label"] for d in frontier["datasets"]] != stages:
        fail(f"frontier datasets {[d['label'] for d in frontier['datasets']]} vs stages {stages}")
    if len(frontier["labels"]) < 50:
        fail(f"the frontier chart shows {len(frontier['labels'])} steps")
    steps = json.loads(js("JSON.stringify(window.sfView.lastSteps)"))
    exposed = {int(s["step"]): int(s["exposed_ns"]) / 1e6 for s in steps}
    for i, step in enumerate(frontier["labels"]):
        stack = sum(d["data"][i] for d in frontier["datasets"])
        if abs(stack - exposed[int(step)]) > 1e-3:
            fail(f"step {step}: the frontier stack is {stack} ms, the exposed time {exposed[int(step)]} ms")
    timeline = js("window.sfView.charts['timeline-chart'].data.datasets[0].data.length")
    if timeline < 1:
        fail("the verdict timeline is empty")
    # The job is live: the timeline ends with the window still filling (issue 30, item 10).
    wait_for("the live window in the timeline",
             "window.sfView.charts['timeline-chart'].data.labels.at(-1).endsWith('(live)')")
    # A decision not to capture shows no capture id (it used to read "id 0 · no").
    ids = js("[...document.querySelectorAll('#captures tbody tr td:first-child')]"
             ".map(td => td.textContent)")
    if "0" in ids:
        fail(f"the captures table shows a capture id 0: {ids}")
    health_rows = js("document.querySelectorAll('#health tbody tr').length")
    if health_rows != world:
        fail(f"rank health shows {health_rows} ranks, want {world}")
    capture_rows = js("document.querySelectorAll('#captures tbody tr').length")
    if capture_rows < 1:
        fail("no capture decision shown")
    # Issue 31, item 3: a stall is a banner naming the reason and the stuck or dead ranks with
    # stage, step and seconds. This job never stalls: no banner, and its list badge is not
    # STALLED. The banner's words are checked on fixed replies (a real hang takes
    # tests/e2e/e2e_hang_test.sh's time): the JSON the bridge gives (int64 as strings).
    if not js("document.getElementById('stall').hidden"):
        fail("a stall banner shows for a job that is not stalled")
    badges = js("[...document.querySelectorAll('#jobs .badge')].map(b => b.textContent)")
    if "STALLED" in badges:
        fail(f"the job list says STALLED for a job that is not: {badges}")
    hung = {"reason": "hung", "alarm": True, "stalled_ns": "42000000000",
            "frontier_step": "150", "ended": False, "ranks": [
                {"rank": 0, "node": "node0", "step": "150", "stage": "data",
                 "open_ns": "41200000000", "role": "stuck"},
                {"rank": 1, "node": "node1", "step": "150", "stage": "grad_sync",
                 "open_ns": "40000000000", "role": "waiting"},
                {"rank": 2, "node": "node1", "step": "150", "stage": "grad_sync",
                 "open_ns": "40000000000", "role": "waiting"}]}
    dead = {"reason": "dead", "alarm": True, "stalled_ns": "9000000000", "frontier_step": "7",
            "ended": False, "ranks": [{"rank": 3, "node": "node1", "step": "7", "stage": "",
                                       "open_ns": "0", "role": "dead"}]}
    pause = {"reason": "group_wide_pause", "alarm": False, "stalled_ns": "20000000000",
             "frontier_step": "99", "ended": False, "ranks": []}
    want = {
        "hung": ("STALLED (hung) for 42 s, no step past 150: rank 0 stuck in data at step 150 "
                 "for 41 s (node node0); 2 ranks waiting"),
        "dead": ("STALLED (dead) for 9 s, no step past 7: rank 3 dead (process gone), last "
                 "between steps at step 7 (node node1)"),
        "pause": "STALLED (group-wide pause) for 20 s, no step past 99 (no alarm yet)",
    }
    for name, stall in (("hung", hung), ("dead", dead), ("pause", pause)):
        # Shown and read back in one script: the page's next refresh hides it again.
        hidden, words, cls = driver.execute_script(
            "showStall(arguments[0]); const b = document.getElementById('stall');"
            "const r = [b.hidden, b.textContent, b.className]; return r;", stall)
        if hidden or words != want[name]:
            fail(f"stall banner for {name}: hidden={hidden}, {words!r}, want {want[name]!r}")
        if ("quiet" in cls) != (not stall["alarm"]):
            fail(f"stall banner for {name}: class {cls!r} (a non-alarm stall is quiet)")
    verdict = driver.execute_script(
        "return describe({label: 'STALLED', stall: arguments[0]});", hung)
    if verdict != "STALLED (hung)":
        fail(f"the verdict of a stalled job reads {verdict!r}, not 'STALLED (hung)'")
    ended = dict(hung, ended=True)
    hidden = driver.execute_script(
        "showStall(arguments[0]); return document.getElementById('stall').hidden;", ended)
    if not hidden:
        fail("the stall banner stays up after the stall ended")
    driver.save_screenshot(os.path.join(out, "web_view_job.png"))
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and "/api/" not in e["message"]]  # the 401s of the token check above
    if errors:
        fail(f"browser errors: {errors}")
    print(f"PASS: {banner}; {len(cells)} heatmap cells, {timeline} windows, "
          f"{len(frontier['labels'])} steps; screenshots in {out}")
finally:
    driver.quit()
