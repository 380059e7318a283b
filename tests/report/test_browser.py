"""Every kind of report, opened in a real headless Chromium.

Real runs of each kind on tiny generated models (idle, calibrate, swap, repro, and compare of
two idle runs), made once for the module.  Each report is checked in the browser for:
console errors (script errors, failed loads, anything logged), external resources (only
data: URIs, same-directory files and loopback), tables wider than the viewport (with every
<details> opened), the page scrolling sideways, at 1280 px and at a phone's 420 px (where a
table may be wider only inside its own scrolling box), and the headline (a Findings section
with at least one sentence, before every caveat banner; for idle, sentences with numbers that
the wake table agrees with, cell by cell).  A screenshot of each lands in the test's temporary directory
(``LBENCH_SCREENSHOTS=DIR`` keeps them) for a person to look at.

Chromium comes from the system packages (scripts/setup.sh installs Debian's ``chromium``
when apt-get can run without a password); the test is skipped, saying so, only when no
Chromium is installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

pytestmark = pytest.mark.engine

VIEWPORT = (1280, 900)
KINDS = ("idle", "calibrate", "swap", "repro", "compare")
HEADLINE = {  # what the first findings of each kind's report talk about
    "idle": "wake step", "calibrate": "targets met", "swap": "models_max", "repro": "claims checked",
    "compare": "groups compared"}


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


# Injected first into <head> of a copy of the report: collects errors from the start, then on
# load opens every <details>, measures, and writes what it found into <pre id="lbench-check">.
PROBE = """
(function () {
  var errors = [];
  window.addEventListener("error", function (e) {
    var t = e.target;
    errors.push(t && t !== window ? "failed to load " + (t.src || t.href || t.tagName) : "error: " + e.message);
  }, true);
  ["error", "warn"].forEach(function (level) {
    var original = console[level];
    console[level] = function () {
      errors.push("console." + level + ": " + Array.prototype.join.call(arguments, " "));
      original.apply(console, arguments);
    };
  });
  window.addEventListener("load", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
    var width = window.innerWidth;
    // a table may be wider than a phone, but only inside its own scrolling box (div.scroll)
    var wide = Array.prototype.map.call(document.querySelectorAll("table"), function (t) {
      var box = t.closest(".scroll") || t;  // the outermost box: a table in a table scrolls with it
      while (box.parentElement && box.parentElement.closest(".scroll")) { box = box.parentElement.closest(".scroll"); }
      return {right: Math.ceil(box.getBoundingClientRect().right), boxed: box !== t,
              first_row: (t.rows[0] ? t.rows[0].innerText : "").replace(/\\s+/g, " ").slice(0, 80)};
    }).filter(function (t) { return t.right > width || (!t.boxed && width < 600); });
    // the headline comes before every caveat banner
    var all = Array.prototype.slice.call(document.body.querySelectorAll("*"));
    var firstBanner = document.querySelector(".banner");
    var findingsAt = all.indexOf(document.evaluate("//h2[normalize-space(.)='Findings']", document, null, 9,
                                                   null).singleNodeValue);
    var bannerFirst = firstBanner !== null && findingsAt >= 0 && all.indexOf(firstBanner) < findingsAt;
    // each headline sentence and the wake table's row for the same cell name one shape
    var disagree = [];
    document.querySelectorAll("ul.headline li[data-cell]").forEach(function (li) {
      var row = null;
      document.querySelectorAll("table.wake tr[data-cell]").forEach(function (tr) {
        if (tr.getAttribute("data-cell") === li.getAttribute("data-cell")) { row = tr; } });
      if (!row || row.getAttribute("data-shape") !== li.getAttribute("data-shape")) {
        disagree.push(li.getAttribute("data-cell")); }
    });
    var heading = document.evaluate("//h2[normalize-space(.)='Findings']", document, null, 9, null).singleNodeValue;
    var list = heading ? heading.nextElementSibling : null;
    var sentences = list && list.tagName === "UL" ? Array.prototype.map.call(list.children, function (li) {
      return li.innerText.trim(); }).filter(Boolean) : [];
    var out = document.createElement("pre");
    out.id = "lbench-check";
    out.textContent = JSON.stringify({errors: errors, viewport: width,
      scroll_width: document.documentElement.scrollWidth, scroll_height: document.documentElement.scrollHeight,
      wide_tables: wide, resources: performance.getEntriesByType("resource").map(function (r) { return r.name; }),
      headline: heading ? sentences : null, h1: (document.querySelector("h1") || {}).innerText || null,
      banner_before_headline: bannerFirst, disagree: disagree,
      wake_rows: document.querySelectorAll("table.wake tr[data-cell]").length});
    document.body.appendChild(out);
  });
})();
"""

LOCAL = re.compile(r"^(data:|file:|#|[^:/]+(/|$)|(https?:)?//(127\.0\.0\.1|localhost)([:/]|$))", re.I)
URL_ATTR = re.compile(r"""(?:\bsrc|\bhref|\baction|\bposter|\bdata)\s*=\s*["']?([^"'\s>]+)|url\(\s*["']?([^"')]+)|@import\s+["']([^"']+)""",
                      re.I)


def external_references(html: str) -> list[str]:
    """URLs in the page's markup and CSS that leave the machine (anything but data:, relative, loopback)."""
    urls = [a or b or c for a, b, c in URL_ATTR.findall(html)]
    return sorted({u for u in urls if not LOCAL.match(u.strip())})


def browse(browser: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    # no network at all (any host name fails to resolve), no first-run or GPU noise
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
                           f"--user-data-dir={cwd / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def check_in_browser(browser: str, report: Path, work: Path, width: int = VIEWPORT[0]) -> dict:
    """Open a probed copy of the report (next to the original, so relative links resolve) and read
    back what the probe wrote, plus every console message Chromium logged."""
    html = report.read_text()
    copy = report.with_name(f".browser-check-{report.name}")
    copy.write_text(html.replace("<head>", f"<head><script>{PROBE}</script>", 1))
    try:
        proc = browse(browser, f"--window-size={width},{VIEWPORT[1]}", "--virtual-time-budget=5000",
                      "--enable-logging=stderr", "--v=0", "--dump-dom", copy.as_uri(), cwd=work)
    finally:
        copy.unlink()
    found = re.search(r'<pre id="lbench-check">(.*?)</pre>', proc.stdout, flags=re.S)
    assert found, f"the probe wrote nothing: rc={proc.returncode}\n{proc.stderr[-3000:]}"
    result = json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
                        .replace("&amp;", "&"))
    result["console"] = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return result


def screenshot(browser: str, report: Path, height: int, out: Path, work: Path, width: int = VIEWPORT[0]) -> Path:
    height = max(VIEWPORT[1], min(height, 12000))
    proc = browse(browser, f"--window-size={width},{height}", f"--screenshot={out}", report.as_uri(), cwd=work)
    assert out.is_file() and out.stat().st_size > 10_000, proc.stderr[-2000:]
    return out


def _new_run(results: Path, before: set[str]) -> Path:
    (new,) = [p for p in results.iterdir() if p.is_dir() and p.name not in before]
    return new


@pytest.fixture(scope="module")
def reports(tmp_path_factory, engine_binary) -> dict[str, Path]:
    """One short real run of every kind (tiny models, the fewest requests the options allow)."""
    if chromium() is None:
        pytest.skip("Chromium is not installed (scripts/setup.sh installs Debian's chromium when apt-get "
                    "can run without a password): reports were not checked in a browser")
    base = tmp_path_factory.mktemp("browser")
    results = base / "results"
    env = {"LBENCH_CACHE_DIR": str(base / "cache"), "LBENCH_CATALOG": str(base / "catalog.toml"),
           "LBENCH_RESULTS_DIR": str(results), "LBENCH_LLAMA_SERVER": str(engine_binary)}
    commands = {
        "idle": ["idle", "-m", "tiny-q8", "--pauses", "0,0.05,0.2", "--reps", "2", "--warmup", "1",
                 "--keep-alive", "default,none"],
        "idle-b": ["idle", "-m", "tiny-q8", "--pauses", "0,0.05,0.2", "--reps", "2", "--warmup", "1",
                   "--keep-alive", "default,none"],
        "calibrate": ["calibrate", "--reps", "1"],
        "swap": ["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--models-max", "1", "--pattern", "round-robin",
                 "-n", "6"],
        "repro": ["repro", "router-cap", "idle-metal-keepalive-180s"],
    }
    runs = {}
    for name, args in commands.items():
        before = {p.name for p in results.iterdir()} if results.is_dir() else set()
        r = run_cli(*args, env=env)
        assert r.returncode == 0, f"lbench {' '.join(args)}\n{r.stderr}{r.stdout}"
        runs[name] = _new_run(results, before)
    out = {kind: runs[kind] / "report.html" for kind in ("idle", "calibrate", "swap", "repro")}
    out["compare"] = base / "compare.html"
    r = run_cli("compare", str(runs["idle"]), str(runs["idle-b"]), "--html", str(out["compare"]), env=env)
    assert r.returncode == 0, r.stderr + r.stdout
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_report_reads_well_in_a_real_browser(kind, reports, tmp_path):
    browser = chromium()
    report = reports[kind]
    html = report.read_text()
    assert external_references(html) == [], "the report must be self-contained"

    result = check_in_browser(browser, report, tmp_path)
    assert result["errors"] == [] and result["console"] == [], "console errors in the browser"
    remote = [u for u in result["resources"] if not LOCAL.match(u)]
    assert remote == [], "the browser fetched something from outside the machine"
    assert result["wide_tables"] == [], f"tables wider than the {VIEWPORT[0]} px viewport"
    assert result["scroll_width"] <= result["viewport"], "the page scrolls sideways"
    assert result["h1"], "no title"
    assert result["headline"], "no Findings section with sentences"
    assert any(len(s) > 20 for s in result["headline"]), result["headline"]  # sentences, not a bare list
    assert HEADLINE[kind] in " ".join(result["headline"][:2]), result["headline"]
    assert not result["banner_before_headline"], "a banner stands before the headline"
    if kind == "idle":  # the answer has numbers, and the wake table gives the same one
        assert all(re.search(r"\d ms \[", s) for s in result["headline"]), result["headline"]
        assert result["wake_rows"] and result["disagree"] == [], result["disagree"]

    keep = Path(os.environ["LBENCH_SCREENSHOTS"]) if os.environ.get("LBENCH_SCREENSHOTS") else tmp_path
    keep.mkdir(parents=True, exist_ok=True)
    screenshot(browser, report, result["scroll_height"], keep / f"{kind}.png", tmp_path)


PHONE = 420


@pytest.mark.parametrize("kind", KINDS)
def test_report_at_phone_width_never_widens_the_page(kind, reports, tmp_path):
    """At 420 px every table scrolls inside its own box; the page itself never scrolls sideways."""
    browser = chromium()
    result = check_in_browser(browser, reports[kind], tmp_path, width=PHONE)
    assert result["errors"] == [], result["errors"]
    assert result["wide_tables"] == [], f"tables widen the page at {PHONE} px: {result['wide_tables']}"
    assert result["scroll_width"] <= result["viewport"], f"the page scrolls sideways at {PHONE} px"
    keep = Path(os.environ["LBENCH_SCREENSHOTS"]) if os.environ.get("LBENCH_SCREENSHOTS") else tmp_path
    keep.mkdir(parents=True, exist_ok=True)
    screenshot(browser, reports[kind], result["scroll_height"], keep / f"{kind}-{PHONE}.png", tmp_path, width=PHONE)


def test_the_checks_catch_what_they_look_for(reports, tmp_path):
    """A report broken on purpose: each check must see its own fault."""
    bad = tmp_path / "report.html"
    html = reports["idle"].read_text()
    html = html.replace("<h2>Findings</h2>", "<h2>Notes</h2>")
    html = html.replace("</body>", '<img src="https://example.com/x.png"><table><tr><td style="white-space:nowrap">'
                        + "wide " * 400 + "</td></tr></table><script>console.error('boom'); no_such();</script>"
                        "</body>")
    bad.write_text(html)
    assert external_references(html) == ["https://example.com/x.png"]
    result = check_in_browser(chromium(), bad, tmp_path)
    assert any("boom" in e for e in result["errors"]) and any("no_such" in e for e in result["errors"])
    assert any("example.com" in e for e in result["errors"])  # the blocked load is an error too
    assert any("boom" in line for line in result["console"])
    assert len(result["wide_tables"]) == 1 and result["scroll_width"] > result["viewport"]
    assert result["headline"] is None
    # a banner moved above the headline, and a wake row that contradicts its sentence, are caught
    html = reports["idle"].read_text()
    banner = '<details class="banner warn"><summary>moved</summary></details>'
    html = html.replace("<h2>Findings</h2>", banner + "<h2>Findings</h2>", 1)
    html = re.sub(r'(<tr data-cell="[^"]*" data-shape=")[^"]*"', r'\1ramp"', html, count=1)
    bad.write_text(html)
    result = check_in_browser(chromium(), bad, tmp_path)
    assert result["banner_before_headline"] and result["disagree"]
