"""The manual (``make docs``, docs/build_site.py): it builds in mkdocs' strict mode (a link or
anchor that points nowhere fails the build), every internal link and image of every page then
resolves, the Python API reference shows the docstrings with their parameter sections, and two
pages opened in headless Chromium (Debian's package; the Makefile installs it) show a rendered
page (docs/check_render.py), which a blank page does not."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


class Links(HTMLParser):
    """The ids a page defines and the links and images it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name):
                self.refs.append(attrs[name])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("manual") / "site"
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "build_site.py"), "--out", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return site


def test_the_manual_builds_and_no_internal_link_or_image_is_broken(site):
    pages = {}
    for name in os.listdir(site):
        if name.endswith(".html"):
            parser = Links()
            parser.feed((site / name).read_text(encoding="utf-8"))
            pages[name] = parser
    for page in [
        "index.html",
        "dsl.html",
        "operating.html",
        "semantics.html",
        "benchmark-results.html",
        "api.html",
        "semantics-in-pictures.html",
        "coming-from-kafka-streams.html",
        "choosing.html",
        "cli.html",
    ]:
        assert page in pages, sorted(pages)
    broken = []
    for name, parser in pages.items():
        for ref in parser.refs:
            if re.match(r"^[a-z]+:", ref) or ref.startswith("//"):
                continue  # outside the site: the theme's credits
            path, _, anchor = ref.partition("#")
            # (the 404 page's links start at the site's root: a server shows it for any path)
            target = name if not path else os.path.normpath(path.lstrip("/"))
            if not (site / target).exists():
                broken.append(f"{name}: {ref} (no {target})")
            elif anchor and target.endswith(".html") and anchor not in pages[target].ids:
                broken.append(f"{name}: {ref} (no #{anchor} in {target})")
    assert not broken, "\n".join(broken[:20])
    # a link to another page of the manual lands on that page, at the right anchor
    assert any(
        r.startswith("dsl.html#") or r.startswith("semantics.html") for r in pages["operating.html"].refs
    )
    # the guide's pages: in the navigation after "Getting started", their pictures on the page, and
    # their links into other pages land on those pages
    index = (site / "index.html").read_text(encoding="utf-8")
    guides = ("semantics-in-pictures.html", "coming-from-kafka-streams.html", "choosing.html")
    nav = [index.find(f'href="{p}"') for p in guides]
    assert 0 < nav[0] < nav[1] < nav[2] < index.find('href="dedup.html"'), nav
    pictures = [r for r in pages["semantics-in-pictures.html"].refs if r.endswith(".svg")]
    assert len(pictures) == 3, pictures
    assert any(
        r.startswith("dsl.html#kafka-streams-and-us") for r in pages["coming-from-kafka-streams.html"].refs
    )
    api = (site / "api.html").read_text(encoding="utf-8")
    for shown in ["kstreams_spark.KStream.deduplicate_by_key", "late_records", "repartition_state"]:
        assert shown in api, shown


def test_the_pictures_are_what_docs_pictures_py_draws_from_the_rules():
    """docs/guide/pictures/*.svg are committed; the script draws them from tests/reference.py and
    the spec's example, and --check fails on any picture that differs."""
    check = [sys.executable, os.path.join(ROOT, "docs", "pictures.py"), "--check"]
    done = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_pages_render_in_headless_chromium_and_a_blank_page_does_not(site):
    check = [sys.executable, os.path.join(ROOT, "docs", "check_render.py"), str(site)]
    done = subprocess.run([*check, "index.html", "api.html"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "check_render: index.html renders (theme, navigation, text)",
        "check_render: api.html renders (theme, navigation, text)",
    ]
    (site / "blank.html").write_text("<html><body></body></html>")
    blank = subprocess.run([*check, "blank.html"], capture_output=True, text=True, timeout=300)
    assert blank.returncode == 1
    assert "blank.html: no dark navigation bar on the left" in blank.stderr, blank.stderr
