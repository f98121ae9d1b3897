"""The fonts figures are drawn with (``render.use_bundled_fonts``): on Linux a rendering process
draws the default sans-serif text with vl-convert's bundled Liberation Sans, whatever the host has
installed (a host's own Liberation Sans 1.07 used to be opened again for every glyph: half of the
rendering's time), and still finds the host's fonts for characters the bundled one lacks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from cocoeval.analysis import charts, render

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the bundled-fonts setting is made through fontconfig, on Linux only"
)

_DRAW = """
import hashlib, json, sys
import vl_convert as vlc
for d in sys.argv[2:]:
    vlc.register_font_directory(d)
svg = vlc.vega_to_svg(vlc.vegalite_to_vega(sys.argv[1]))
print(json.dumps([hashlib.sha256(svg.encode()).hexdigest(), hashlib.sha256(vlc.svg_to_png(svg, scale=2.0)).hexdigest()]))
"""


def spec(label: str) -> str:
    # a clipped mark: vl-convert numbers its clip ids per process, so a worker that had drawn one
    # before (its warm-up) would write another SVG than a fresh process
    return json.dumps(
        {
            "data": {"values": [{"a": label, "b": 1}, {"a": "Repetition", "b": 2}]},
            "mark": {"type": "bar", "clip": True},
            "encoding": {"x": {"field": "a", "type": "nominal"}, "y": {"field": "b", "type": "quantitative"}},
            "title": "Behaviour rates",
        }
    )


def drawn(spec_json: str, env: dict[str, str], dirs: list[str] = ()) -> list[str]:
    """The SHA-256 of the SVG and of the PNG vl-convert draws in a fresh process with ``env``,
    with the font folders ``dirs`` registered first."""
    out = subprocess.run(
        [sys.executable, "-c", _DRAW, spec_json, *dirs], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def saved(spec_json: str, tmp_path, name: str) -> list[str]:
    """The same hashes of the files ``charts.save`` writes (in a rendering process)."""
    png, svg = charts.save(json.loads(spec_json), tmp_path / name)
    return [hashlib.sha256(svg.read_bytes()).hexdigest(), hashlib.sha256(png.read_bytes()).hexdigest()]


def host_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "FONTCONFIG_FILE"}


def bundled_only_env() -> dict[str, str]:
    return {**host_env(), "FONTCONFIG_FILE": str(render.FONTS_CONF)}


def test_figures_are_drawn_with_the_bundled_liberation_sans_whatever_the_host_has(tmp_path, monkeypatch):
    """``charts.save`` (a rendering process) draws exactly what a fresh vl-convert process draws
    with its bundled fonts alone (the worker's warm-up chart shifted no clip id), even when the
    caller's own environment names another fontconfig file; where the host has a Liberation Sans
    of its own, vl-convert left to itself draws another PNG."""
    monkeypatch.setenv("FONTCONFIG_FILE", "/etc/fonts/fonts.conf")  # the caller's: not the rendering's
    s = spec("Off-topic")
    assert saved(s, tmp_path, "latin") == drawn(s, bundled_only_env())
    host = [
        os.path.join(d, f)
        for top in render.host_font_dirs()
        for d, _, fs in os.walk(top)
        for f in fs
        if f == "LiberationSans-Regular.ttf"
    ]
    if not host:
        pytest.skip("the host has no Liberation Sans of its own: vl-convert uses its bundled one either way")
    left_to_itself = drawn(s, host_env())
    assert left_to_itself[0] == drawn(s, bundled_only_env())[0]  # the same metrics: the same SVG
    assert left_to_itself[1] != drawn(s, bundled_only_env())[1]  # other glyphs: another PNG


def test_characters_the_bundled_font_lacks_come_from_the_hosts_fonts(tmp_path):
    """A Georgian label (not in Liberation Sans) is measured and drawn with a host font, as
    vl-convert left to itself does; with the bundled fonts alone it would not be."""
    s = spec("გამარჯობა")
    alone = drawn(s, bundled_only_env())
    with_host = drawn(s, bundled_only_env(), render.host_font_dirs())
    if with_host == alone:
        pytest.skip("no host font has Georgian letters (e.g. DejaVu Sans)")
    assert saved(s, tmp_path, "georgian") == with_host
    assert saved(s, tmp_path, "georgian")[0] == drawn(s, host_env())[0]  # measured as before: the same SVG


def test_a_rendering_process_is_started_with_the_fonts_setting_and_this_cocoeval():
    env = render.process_env()
    assert env["FONTCONFIG_FILE"] == str(render.FONTS_CONF) and render.FONTS_CONF.is_file()
    assert "<dir>" in render.FONTS_CONF.read_text() and not any(render.FONTS_CONF.parent.glob("*.ttf"))
    root = str(render.FONTS_CONF.resolve().parents[2])
    assert env["PYTHONPATH"].split(os.pathsep)[0] == root
