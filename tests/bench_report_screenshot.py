"""The report in a real browser: headless Chromium renders report.html at desktop width, writes a
screenshot, and says where the headline ends against the fold.

    .venv/bin/python -m tests.bench_report_screenshot [RUN_DIR...] [--out DIR] [--width 1440] [--height 900]

Without run directories it reports the two latest runs under results/ (as `make report`). Prints
the screenshot's path, the headline's first table's bottom edge in CSS pixels, and whether it is
above the fold (the page's viewport: the window less the browser's frame, as in a real window). Chromium: `chromium`, `chromium-browser`, `google-chrome` or
$SPARKBENCH_CHROMIUM; `apt-get install -y chromium` on Debian.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from matplotlib.image import imread

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Measures the laid-out page and writes the figures into the DOM, which --dump-dom then prints.
PROBE = """<script>
window.addEventListener('load', () => {
  const box = (q) => { const e = document.querySelector(q); if (!e) return null;
                       const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; };
  const out = document.createElement('pre'); out.id = 'sparkbench-probe';
  out.textContent = JSON.stringify({viewport: [innerWidth, innerHeight], headline: box('#headline'),
    first_table: box('#headline table.key'), figures: box('.figs'), scroll_width: document.body.scrollWidth});
  document.body.appendChild(out);
});
</script>"""
PROBE_OUT = re.compile(r"<pre id=\"sparkbench-probe\">(.*?)</pre>", re.S)


def find_browser() -> str | None:
    """The Chromium executable: $SPARKBENCH_CHROMIUM, else the first of BROWSERS on PATH."""
    return os.environ.get("SPARKBENCH_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)


def _chromium(browser: str, width: int, height: int, *args: str) -> subprocess.CompletedProcess:
    # A profile folder of its own: a user's running browser is never touched. --no-sandbox lets it run as root.
    with tempfile.TemporaryDirectory(prefix="sparkbench-chromium-") as profile:
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   "--no-first-run", f"--user-data-dir={profile}", f"--window-size={width},{height}",
                   "--virtual-time-budget=10000", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def screenshot(browser: str, page: Path, png: Path, width: int = 1440, height: int = 900) -> Path:
    """The first `height` pixels of the page at `width` as PNG."""
    done = _chromium(browser, width, height, f"--screenshot={png}", page.resolve().as_uri())
    if not png.exists():
        raise RuntimeError(f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-500:]}")
    return png


def layout(browser: str, page: Path, width: int = 1440, height: int = 900) -> dict:
    """Where the headline and its first table lie on the laid-out page (CSS pixels from the top),
    measured by a copy of the page with a probe script (the report itself holds no script)."""
    with tempfile.TemporaryDirectory(prefix="sparkbench-probe-") as folder:
        probe = Path(folder) / "probe.html"
        probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
        done = _chromium(browser, width, height, "--dump-dom", probe.as_uri())
    found = PROBE_OUT.search(done.stdout)
    if not found:
        raise RuntimeError(f"the probe printed nothing (exit {done.returncode}): {done.stderr[-500:]}")
    return json.loads(found.group(1))


def ink_share(png: Path) -> float:
    """Share of the screenshot's pixels that differ from its most common colour (the background)."""
    pixels = imread(png)[..., :3].reshape(-1, 3)
    colours, counts = np.unique((pixels * 255).round().astype(np.uint8), axis=0, return_counts=True)
    return 1.0 - counts.max() / len(pixels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=Path("results/report"))
    parser.add_argument("--width", type=int, default=1440)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args(argv)
    from harness.report.report import build_report, find_run_dirs

    browser = find_browser()
    if browser is None:
        print("no Chromium found: apt-get install -y chromium, or set SPARKBENCH_CHROMIUM", file=sys.stderr)
        return 2
    runs = args.runs or find_run_dirs("results")[-2:]
    if not runs:
        print("no run directories given and none under results/", file=sys.stderr)
        return 2
    html, _ = build_report(runs, args.out)
    png = screenshot(browser, html, args.out / f"screenshot-{args.width}.png", args.width, args.height)
    found = layout(browser, html, args.width, args.height)
    bottom = found["first_table"]["bottom"] if found["first_table"] else float("nan")
    width, fold = found["viewport"]
    print(f"screenshot: {png} ({ink_share(png):.1%} of pixels not background)")
    print(f"headline's first table ends at {bottom:.0f} px; the page's viewport in a {args.width} x {args.height} "
          f"window is {width} x {fold} px: {'above' if bottom <= fold else 'BELOW'} the fold; "
          f"page width {found['scroll_width']} px{'' if found['scroll_width'] <= width else ' (runs off the side)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
