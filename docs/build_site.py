"""Builds the manual (``make docs``): a static site of the README's sections, the contract
(docs/SEMANTICS.md), the benchmark results, the Python API reference generated from the docstrings
(mkdocstrings) and the Scaladoc.

The pages are cut from README.md at its ``##`` headings, so that every code block of the manual is
one that ``make test`` already runs (tests/test_readme.py and the packaging test); the guide's own
pages (docs/guide/) hold no code to run, and their pictures are drawn by docs/pictures.py. Links are
rewritten for the site: an anchor to another section points to that section's page, a link to
docs/SEMANTICS.md or benchmarks/RESULTS.md to its page, an image is copied beside the page, and a
link to any other file of the repository becomes its path in code (the site has no copy of the
tree). mkdocs builds in strict mode, so a link or anchor that points nowhere fails the build.

    python docs/build_site.py [--out site] [--scaladoc jvm/target/scala-2.13/api]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# README section -> page (file name, title in the navigation); sections not named here go on the
# page of the section before them
PAGES = {
    "Two commands": ("index.md", "Getting started"),
    "Python": ("python.md", "Python"),
    "The DSL: stateless operators, aggregations, tables, joins": ("dsl.md", "The DSL"),
    "Kafka": ("kafka.md", "Kafka"),
    "Real-time mode": ("real-time.md", "Real-time mode"),
    "Scala": ("scala.md", "Scala"),
    "Processor API": ("processor-api.md", "Processor API"),
    "Semantics in short": ("semantics-in-short.md", "Semantics in short"),
    "Crash safety (what the kill test proves)": ("crash-safety.md", "Crash safety"),
    "Operating a query": ("operating.md", "Operating a query"),
    "Running on a cluster": ("cluster.md", "Running on a cluster"),
    "Spark Connect": ("connect.md", "Spark Connect"),
    "Build notes": ("build-notes.md", "Build notes"),
    "Layout": ("layout.md", "Layout"),
    "Benchmarks": ("benchmarks.md", "Benchmarks"),
}
# the guide's own pages, after "Getting started" in the navigation
GUIDES = {
    "docs/guide/semantics-in-pictures.md": ("semantics-in-pictures.md", "The rules in pictures"),
    "docs/guide/coming-from-kafka-streams.md": ("coming-from-kafka-streams.md", "Coming from Kafka Streams"),
    "docs/guide/choosing.md": ("choosing.md", "Choosing kstreams, Spark's dedup or Flink"),
}
# other files of the tree that are pages of the site
DOCUMENTS = {
    "docs/SEMANTICS.md": ("semantics.md", "The contract (SEMANTICS.md)"),
    "benchmarks/RESULTS.md": ("benchmark-results.md", "Benchmark results"),
}
API_PAGE = ("api.md", "Python API reference")


def slug(title: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"<[^>]+>", "", title)
    text = re.sub(r"[`*_\[\]()]", "", text).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[\s]+", "-", text)


def split_readme(text: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Page file -> its lines (the README's intro goes to the first page), and heading anchor ->
    the page that holds it."""
    pages: dict[str, list[str]] = {}
    anchors: dict[str, str] = {}
    page = PAGES["Two commands"][0]
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        heading = re.match(r"^(#{1,6}) (.*)$", line) if not fence else None
        if heading and len(heading.group(1)) == 2 and heading.group(2) in PAGES:
            page = PAGES[heading.group(2)][0]
        if heading:
            anchors.setdefault(slug(heading.group(2)), page)
        pages.setdefault(page, []).append(line)
    return pages, anchors


def rewrite_links(lines: list[str], source: str, anchors: dict[str, str], out_dir: str) -> list[str]:
    """The page's links as the site needs them (see the module doc); `source` is the repository
    path of the Markdown the lines come from."""
    base = os.path.dirname(source)
    documents = {os.path.normpath(path): page for path, (page, _) in {**GUIDES, **DOCUMENTS}.items()}

    def target(match: re.Match) -> str:
        bang, label, href = match.group(1), match.group(2), match.group(3)
        if re.match(r"^[a-z]+:", href):  # http:, https:, mailto:
            return match.group(0)
        path, _, anchor = href.partition("#")
        if not path:  # an anchor of this document
            if source == "README.md" and anchor in anchors:
                return f"{bang}[{label}]({anchors[anchor]}#{anchor})"
            return match.group(0)
        repo_path = os.path.normpath(os.path.join(base, path))
        if repo_path == "README.md" and anchor in anchors:  # a README section: its page
            return f"{bang}[{label}]({anchors[anchor]}#{anchor})"
        if repo_path in documents:
            return f"{bang}[{label}]({documents[repo_path]}{'#' + anchor if anchor else ''})"
        if bang and os.path.isfile(os.path.join(ROOT, repo_path)):
            copied = repo_path.replace("/", "_")
            shutil.copy(os.path.join(ROOT, repo_path), os.path.join(out_dir, copied))
            return f"![{label}]({copied})"
        # a file of the tree the site does not carry: its path, as code
        return f"{label} (`{repo_path}`)" if label.strip("`") != repo_path else f"`{repo_path}`"

    out, fence = [], False
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        out.append(line if fence else re.sub(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)", target, line))
    return out


def write_pages(src: str) -> list[tuple[str, str]]:
    """Writes the Markdown pages into `src`; returns the navigation (title, file)."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    pages, anchors = split_readme(readme)
    nav = []
    for page, nav_title in PAGES.values():
        lines = rewrite_links(pages[page], "README.md", anchors, src)
        with open(os.path.join(src, page), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        nav.append((nav_title, page))
    for path, (page, nav_title) in {**GUIDES, **DOCUMENTS}.items():
        lines = open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()
        with open(os.path.join(src, page), "w", encoding="utf-8") as f:
            f.write("\n".join(rewrite_links(lines, path, anchors, src)) + "\n")
        if path in GUIDES:  # after the first page, "Getting started", in GUIDES' order
            nav.insert(1 + list(GUIDES).index(path), (nav_title, page))
        else:
            nav.append((nav_title, page))
    with open(os.path.join(src, API_PAGE[0]), "w", encoding="utf-8") as f:
        f.write(
            "# Python API reference\n\n"
            "Generated from the docstrings of the `kstreams_spark` package (the examples in them run "
            "in `make test`).\n\n::: kstreams_spark\n"
        )
    nav.append((API_PAGE[1], API_PAGE[0]))
    return nav


def mkdocs_config(src: str, out: str, nav: list[tuple[str, str]], scaladoc: bool) -> str:
    lines = [
        "site_name: kstreams-spark",
        "site_description: Kafka Streams semantics on Apache Spark Structured Streaming",
        f"docs_dir: {src}",
        f"site_dir: {out}",
        "use_directory_urls: false",
        "theme:",
        "  name: readthedocs",
        "  highlightjs: false",  # served from a CDN: the site reads nothing from the network
        "validation:",
        "  omitted_files: warn",
        "  absolute_links: warn",
        "  unrecognized_links: warn",
        "  anchors: warn",
        "markdown_extensions:",
        "  - toc:",
        "      permalink: true",
        "  - tables",
        "  - fenced_code",
        "plugins:",
        "  - search",
        "  - mkdocstrings:",
        "      handlers:",
        "        python:",
        f"          paths: [{os.path.join(ROOT, 'python')}]",
        "          options:",
        "            docstring_style: google",
        "            members_order: source",
        "            show_source: false",
        "            show_root_heading: true",
        "nav:",
    ]
    lines += [f"  - {title!r}: {page}" for title, page in nav]
    if scaladoc:
        lines.append("  - 'Scala API (Scaladoc)': scaladoc/index.html")
    path = os.path.join(os.path.dirname(src), "mkdocs.yml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def build(out: str, scaladoc: str | None) -> None:
    work = tempfile.mkdtemp(prefix="kstreams-docs-")
    src = os.path.join(work, "pages")
    os.makedirs(src)
    nav = write_pages(src)
    if scaladoc:
        shutil.copytree(scaladoc, os.path.join(src, "scaladoc"))
    config = mkdocs_config(src, os.path.abspath(out), nav, bool(scaladoc))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", config])
    if done.returncode != 0:
        raise SystemExit(f"mkdocs build failed (pages in {src})")
    shutil.rmtree(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default=os.path.join(ROOT, "site"), help="the site's folder (default: site/)"
    )
    parser.add_argument("--scaladoc", help="the Scaladoc folder to include (sbt doc's output)")
    args = parser.parse_args()
    build(args.out, args.scaladoc)


if __name__ == "__main__":
    main()
