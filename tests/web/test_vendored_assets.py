"""Vendored front-end assets work offline: no CDN address or source map in them, and every page loads what exists."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
VENDOR = ROOT / "static" / "vendor"
# Hosts a bundle could fetch from at run time (Plotly's topojson default was one).
CDN = re.compile(r"cdn\.plot\.ly|cdn\.jsdelivr|cdnjs\.|unpkg\.com|fonts\.googleapis|https?://cdn\.", re.IGNORECASE)


def test_no_cdn_address_or_source_map_in_vendored_assets():
    files = [p for p in VENDOR.rglob("*") if p.is_file() and p.suffix in {".js", ".css"}]
    assert len(files) >= 4
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not CDN.search(text), f"{path.relative_to(ROOT)}: {CDN.search(text).group(0)}"
        assert "sourceMappingURL" not in text, path.relative_to(ROOT)


def test_plotly_bundle_draws_heatmaps_and_points_map_data_at_static():
    bundle = (VENDOR / "plotly" / "plotly-cartesian.min.js").read_text(encoding="utf-8")
    assert bundle.startswith("/**\n* plotly.js (cartesian - minified) v3.7.0")
    assert 'topojsonURL:{valType:"string",noBlank:!0,dflt:"/static/vendor/plotly/topojson/"}' in bundle
    assert 'moduleType:"trace",name:"heatmap"' in bundle
    assert not (VENDOR / "plotly" / "plotly-basic.min.js").exists()


def test_templates_load_only_vendored_files_that_exist():
    referenced = set()
    for template in (ROOT / "templates").rglob("*.html"):
        referenced |= set(re.findall(r"{% static '(vendor/[^']+)' %}", template.read_text(encoding="utf-8")))
    assert "vendor/plotly/plotly-cartesian.min.js" in referenced
    for path in referenced:
        assert (ROOT / "static" / path).is_file(), path
