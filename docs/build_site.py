"""Builds the manual (``make docs``): a static site of README.md (its first page) and the guide's
pages (docs/guide/), the contract (docs/SEMANTICS.md), the benchmark results, the Python API
reference generated from the docstrings (mkdocstrings) and the Scaladoc.

Every Python and Scala block of README and the guide is one that ``make test`` runs (which test
reads which: the guide's Build notes; tests/test_readme.py fails on a Python block none reads); the
pictures are drawn by docs/pictures.py. Links are rewritten for the site: a link to README or to a
guide page (with its anchor) points to that page, docs/SEMANTICS.md and benchmarks/RESULTS.md to
theirs, an image is copied beside the page, and a link to any other file of the repository becomes
its path in code (the site has no copy of the tree). mkdocs builds in strict mode, so a link or
anchor that points nowhere fails the build.

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

# README is the first page
INDEX = ("index.md", "Getting started")
# the guide's pages, in the navigation's order after "Getting started"
GUIDES = {
    f"docs/guide/{page}": (page, title)
    for page, title in [
        ("semantics-in-pictures.md", "The rules in pictures"),
        ("coming-from-kafka-streams.md", "Coming from Kafka Streams"),
        ("choosing.md", "Choosing kstreams, Spark's dedup or Flink"),
        ("dedup.md", "Deduplication"),
        ("windowed-distinct.md", "Windowed distinct"),
        ("metrics.md", "Metrics"),
        ("late-records.md", "Late records"),
        ("errors.md", "Set-up and errors"),
        ("cli.md", "The command line"),
        ("dsl.md", "The DSL"),
        ("aggregations.md", "Aggregations"),
        ("tables.md", "Tables"),
        ("joins.md", "Joins"),
        ("kafka.md", "Kafka"),
        ("real-time.md", "Real-time mode"),
        ("scala.md", "Scala"),
        ("processor-api.md", "Processor API"),
        ("semantics-in-short.md", "Semantics in short"),
        ("crash-safety.md", "Crash safety"),
        ("operating.md", "Operating a query"),
        ("cluster.md", "Running on a cluster"),
        ("connect.md", "Spark Connect"),
        ("build-notes.md", "Build notes"),
        ("layout.md", "Layout"),
        ("benchmarks.md", "Benchmarks"),
    ]
}
# other files of the tree that are pages of the site
DOCUMENTS = {
    "docs/SEMANTICS.md": ("semantics.md", "The contract (SEMANTICS.md)"),
    "benchmarks/RESULTS.md": ("benchmark-results.md", "Benchmark results"),
}
API_PAGE = ("api.md", "Python API reference")


def rewrite_links(lines: list[str], source: str, out_dir: str) -> list[str]:
    """The page's links as the site needs them (see the module doc); `source` is the repository
    path of the Markdown the lines come from."""
    base = os.path.dirname(source)
    documents = {os.path.normpath(path): page for path, (page, _) in {**GUIDES, **DOCUMENTS}.items()}
    documents["README.md"] = INDEX[0]

    def target(match: re.Match) -> str:
        bang, label, href = match.group(1), match.group(2), match.group(3)
        if re.match(r"^[a-z]+:", href):  # http:, https:, mailto:
            return match.group(0)
        path, _, anchor = href.partition("#")
        if not path:  # an anchor of this document
            return match.group(0)
        repo_path = os.path.normpath(os.path.join(base, path))
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
    nav = []
    for path, (page, nav_title) in {"README.md": INDEX, **GUIDES, **DOCUMENTS}.items():
        lines = open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()
        with open(os.path.join(src, page), "w", encoding="utf-8") as f:
            f.write("\n".join(rewrite_links(lines, path, src)) + "\n")
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
