"""The HTML report as a person sees it: rendered by headless Chromium, offline.

Skipped, with the reason, where no Chromium is installed (.ci/run installs Debian's package).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from simharness.cli import main
from tests.conftest import SCENARIOS

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((b for b in BROWSERS if shutil.which(b)), None)

pytestmark = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed "
                                "(apt-get install chromium); the page is not rendered")

# Root (CI) needs --no-sandbox; --user-data-dir keeps each run's profile out of the home folder.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-extensions", "--disable-background-networking"]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    code = main(["run", str(SCENARIOS / "bagel_cfg.yaml"), "--runtime", "mstar-rust-prefix",
                 "--report", str(out)])
    assert code == 1
    return out / "report.html"


def _chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def test_the_page_renders_with_its_key_elements(page, tmp_path):
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    for ident in ("parameters", "forwards", "violations", "timeline", "messages", "utilisation",
                  "console"):
        assert f'id="{ident}"' in dom, ident
    assert "FAIL" in dom and "loop_exit" in dom
    assert dom.count('class="extra"') == 21


def test_the_screenshot_is_not_blank(page, tmp_path):
    import numpy as np
    from matplotlib.image import imread

    shot = tmp_path / "shot.png"
    _chromium(tmp_path, "--window-size=1280,3000", f"--screenshot={shot}", page.as_uri())
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (3000, 1280)
    # a blank (or unrendered) page is one colour; ours has text, tables and pictures in colour
    not_white = (pixels < 0.95).any(axis=2).mean()
    assert not_white > 0.05, f"only {not_white:.1%} of the screenshot is not white"
    red = ((pixels[..., 0] > 0.7) & (pixels[..., 1] < 0.35) & (pixels[..., 2] < 0.35)).mean()
    assert red > 0.0005, "no red on the page: the extra passes and strays are not marked"
    assert len(np.unique(pixels[::8, ::8].reshape(-1, 3), axis=0)) > 50
