"""The trend site: built from an archive of real runs, read in headless Chromium at 1280 and 420 px."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from conftest import run_cli
from history_runs import clone_run, real_runs, trusted  # noqa: F401 (a fixture)
from report.test_browser import LOCAL, PROBE, browse, chromium, external_references

from harness.history.catalog import add_runs

pytestmark = pytest.mark.engine

BUILDS = [10300, 10310, 10320, 10326, 10330, 10340, 10350, 10360]
STEP_AT = 10326  # the copies of the idle run are 1.5x slower from here on


@pytest.fixture(scope="module")
def site(real_runs, tmp_path_factory):  # noqa: F811
    base = tmp_path_factory.mktemp("history-trend")
    staged = base / "staged"
    staged.mkdir()
    for i, build in enumerate(BUILDS):
        for rep in range(2):
            n = 2 * i + rep
            wobble = 1 + 0.03 * math.sin(n)  # copies differ a little, as runs do
            clone_run(real_runs["idle"], staged, n, build=build, scale=(1.5 if build >= STEP_AT else 1.0) * wobble)
        clone_run(real_runs["swap"], staged, 100 + i, build=build)
    archive = base / "archive"
    added, refused = add_runs(trusted(archive), [staged])
    assert refused == [] and len(added) == 3 * len(BUILDS)
    out = base / "site"
    r = run_cli("trend", "--archive", str(archive), "--out", str(out))
    assert r.returncode == 0, r.stderr + r.stdout
    return {"archive": archive, "out": out, "stdout": r.stdout}


def test_the_step_is_stated_with_its_builds_and_bisect(site):
    text = " ".join(site["stdout"].split())
    assert "idle_warm_p50 of tiny-q8" in text
    assert "between build 10320" in text and "and build 10326" in text
    assert "lbench bisect --gate -m tiny-q8 --from 10320 --to 10326" in text
    r = run_cli("trend", "--archive", str(site["archive"]), "--out", str(site["out"]), "--bisect", "--dry-run")
    assert r.returncode == 0 and "bisect: lbench bisect --gate -m tiny-q8 --from 10320 --to 10326" in \
        " ".join(r.stdout.split())
    assert "1. idle_warm_p50 of tiny-q8" in text  # the change points with a bisect are numbered for --change
    bisects = len(re.findall(r"(?m)^\d+\. ", site["stdout"]))
    r = run_cli("trend", "--archive", str(site["archive"]), "--out", str(site["out"]), "--bisect", "--dry-run",
                "--change", str(bisects + 1))
    assert r.returncode == 2 and "--change" in r.stderr and f"from 1 to {bisects}" in " ".join(r.stderr.split())


def test_every_point_names_its_run(site):
    (page,) = site["out"].glob("machine-*.html")
    html = page.read_text()
    runs = {p.name for p in site["archive"].glob("[0-9a-f]*/*") if p.is_dir()}
    shown = set(re.findall(r'<span class="runid">([^<]+)</span>', html))
    assert runs <= shown
    assert html.count("<img src=\"data:image/png;base64,") >= 5  # warm, penalty?, load, evict, peaks


def _probe(browser: str, page: Path, width: int, work: Path) -> dict:
    copy = page.with_name(f".probe-{page.name}")
    copy.write_text(page.read_text().replace("<head>", f"<head><script>{PROBE}</script>", 1))
    try:
        proc = browse(browser, f"--window-size={width},900", "--virtual-time-budget=5000", "--enable-logging=stderr",
                      "--v=0", "--dump-dom", copy.as_uri(), cwd=work)
    finally:
        copy.unlink()
    found = re.search(r'<pre id="lbench-check">(.*?)</pre>', proc.stdout, flags=re.S)
    assert found, proc.stderr[-2000:]
    result = json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
                        .replace("&amp;", "&"))
    result["console"] = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return result


@pytest.mark.parametrize("width", [1280, 420])
@pytest.mark.parametrize("page", ["index", "machine"])
def test_the_site_reads_well_in_a_real_browser(site, page, width, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("Chromium is not installed (scripts/setup.sh installs Debian's chromium)")
    path = site["out"] / "index.html" if page == "index" else next(site["out"].glob("machine-*.html"))
    assert external_references(path.read_text()) == [], "the page must be self-contained"
    result = _probe(browser, path, width, tmp_path)
    assert result["errors"] == [] and result["console"] == []
    assert [u for u in result["resources"] if not LOCAL.match(u)] == []
    assert result["scroll_width"] <= result["viewport"], "the page scrolls sideways"
    assert result["headline"], "no Findings section with sentences"
    first = result["headline"][0] + " " + (result["headline"][1] if len(result["headline"]) > 1 else "")
    assert "change point" in first or "went up" in first  # the headline: the newest change points first
    if page == "index":
        assert "between build 10320" in " ".join(result["headline"][1:3])
    keep = Path(os.environ["LBENCH_SCREENSHOTS"]) if os.environ.get("LBENCH_SCREENSHOTS") else tmp_path
    keep.mkdir(parents=True, exist_ok=True)
    shot = keep / f"trend-{page}-{width}.png"
    browse(browser, f"--window-size={width},{min(max(result['scroll_height'], 900), 12000)}",
           f"--screenshot={shot}", path.as_uri(), cwd=tmp_path)
    assert shot.is_file() and shot.stat().st_size > 10_000


def test_the_index_context_counts_every_run_and_lists_the_changes(site):
    from harness.history.trend import build_site

    context = build_site(site["archive"], plots=False).index
    assert context["n_runs"] == 3 * len(BUILDS) and context["changes"]


def test_points_lists_the_newest_runs_and_the_command_that_lists_them_all(site, tmp_path):
    import shlex

    out = tmp_path / "site"
    r = run_cli("trend", "--archive", str(site["archive"]), "--out", str(out), "--points", "3", "--jobs", "1")
    assert r.returncode == 0, r.stderr + r.stdout
    (page,) = out.glob("machine-*.html")
    html = page.read_text()
    assert "the newest 3 of 16 runs" in html and "13 older runs of this series not listed" in html
    (command,) = set(re.findall(r"every run: <code>(lbench history query - --series idle_warm_p50 [^<]*"
                                r"keep-alive=default[^<]*)</code>", html))
    args = shlex.split(command.replace("&#39;", "'").replace("&amp;", "&"))
    listed = run_cli(*args[1:], "--csv")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.strip().splitlines()) == 1 + 16  # header + every idle run
    newest = sorted(p.name for p in site["archive"].glob("[0-9a-f]*/*-idle-*"))[-3:]
    table = html.split('id="idle_warm_p50-0"')[1].split("</table>")[0]
    assert set(re.findall(r'<span class="runid">([^<]+)</span>', table)) == set(newest)
    browser = chromium()
    if browser is not None:  # the long command wraps on a phone
        result = _probe(browser, page, 420, tmp_path)
        assert result["errors"] == [] and result["scroll_width"] <= result["viewport"], "the page scrolls sideways"


def test_a_build_window_keeps_the_newest_builds_and_a_step_at_its_edge(site, tmp_path):
    out = tmp_path / "site"
    r = run_cli("trend", "--archive", str(site["archive"]), "--out", str(out), "--builds", "5")
    assert r.returncode == 0, r.stderr + r.stdout
    text = " ".join(r.stdout.split())
    # 10326 is the window's oldest build: the step into it is judged with the runs of 10320 and before
    assert "lbench bisect --gate -m tiny-q8 --from 10320 --to 10326" in text
    assert "(each machine's newest 5 builds)" in text
    (page,) = out.glob("machine-*.html")
    html = page.read_text()
    assert "3 older builds not shown" in html and "The newest 5 engine builds" in html
    shown = set(re.findall(r'<span class="runid">([^<]+)</span>', html))
    old = {p.name for p in site["archive"].glob("[0-9a-f]*/*") if p.is_dir()
           and json.loads((p / "manifest.json").read_text())["engine"]["build_number"] < STEP_AT}
    assert old and not (old & shown)  # no run of an older build listed


def test_a_step_older_than_the_window_is_not_reported(site, tmp_path):
    r = run_cli("trend", "--archive", str(site["archive"]), "--out", str(tmp_path / "site"), "--builds", "3")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "--from 10320 --to 10326" not in " ".join(r.stdout.split())


def test_bad_bounds_exit_2(site, tmp_path):
    for args in (("--points", "-1"), ("--builds", "0"), ("--jobs", "0")):
        r = run_cli("trend", "--archive", str(site["archive"]), "--out", str(tmp_path / "site"), *args)
        assert r.returncode == 2, args


def test_the_default_points_are_the_sites(site):
    from harness.history.trend import POINTS

    r = run_cli("trend", "--help")
    assert re.search(rf"--points N .*\[default: {POINTS}[;\]]", " ".join(r.stdout.split()))
