"""Spec for the committed browser bundle: static/playground/ holds exactly what `npm ci && npm run build`
makes from frontend/ today (so a change to frontend/src without a rebuild, or a hand edit of the bundle, fails).
Needs npm and the npm registry; skipped with a message where npm is not installed."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ("app.js", "htmx.min.js", "highlight.min.css")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed: the JS bundle check needs Node")
def test_the_committed_bundle_is_a_fresh_build_of_frontend(tmp_path):
    src = tmp_path / "frontend"
    shutil.copytree(ROOT / "frontend", src, ignore=shutil.ignore_patterns("node_modules"))
    (tmp_path / "static" / "playground").mkdir(parents=True)  # build.mjs writes to ../static/playground
    for cmd in (["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], ["npm", "run", "build"]):
        r = subprocess.run(cmd, cwd=src, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    for name in OUTPUTS:
        fresh = (tmp_path / "static" / "playground" / name).read_bytes()
        committed = (ROOT / "static" / "playground" / name).read_bytes()
        assert fresh == committed, f"static/playground/{name} differs from a fresh build: cd frontend && npm ci && npm run build"
