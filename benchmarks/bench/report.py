"""What a regime writes: its table (`regime_table`, ratios to kstreams), results/<regime>.json, a
plot, and its marked section of benchmarks/RESULTS.md (`finish`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from collections.abc import Callable
from typing import NamedTuple

from bench import BENCHMARKS

RESULTS = os.path.join(BENCHMARKS, "results")


def command_line():
    """The command that ran this benchmark, as RESULTS.md quotes it."""
    return " ".join(["python benchmarks/bench", *sys.argv[1:]]).strip()


def reference(results, r, **same):
    """The row `r` is compared with: kstreams' (with --tune: the same candidate's on Spark's
    defaults) among `results` with the same values of `same`; None for that row itself or if
    either failed."""
    base, _, variant = r["name"].partition("+")
    name = f"{base}+defaults" if variant else "kstreams"
    ref = next(
        (o for o in results if o["name"] == name and all(o.get(k) == v for k, v in same.items())), None
    )
    return None if ref is r or ref is None or "error" in ref or "error" in r else ref


def mb(r, key, digits=0):
    return f"{r[key] / 1e6:,.{digits}f}" if key in r else ""


TEXT, NUMBER = "---", "---:"  # a column's alignment


class Column(NamedTuple):
    """One column of a regime's table: its header and the cell of a result row."""

    header: str
    cell: Callable[[dict], str]
    align: str = NUMBER


CANDIDATE = Column("candidate", lambda r: r["name"], TEXT)


def number(header, key, digits=0):
    """A column of `key`'s value (empty where a row has none)."""
    return Column(header, lambda r: f"{r[key]:,.{digits}f}" if key in r else "")


def megabytes(header, key, digits=0):
    return Column(header, lambda r: mb(r, key, digits))


def every_round(header, key, thousands=False):
    """Every round's `key` of a row (rounds_<key>), in k if `thousands`."""

    def cell(r):
        values = r.get(f"rounds_{key}", [])
        return ", ".join(f"{x / 1000:,.0f}k" if thousands else f"{x:,.0f}" for x in values)

    return Column(header, cell, TEXT)


HEAP = [
    megabytes("live heap MB", "live_heap_bytes"),
    megabytes("peak heap MB", "peak_heap_bytes"),
    megabytes("heap after, MB", "heap_after_bytes"),
]


def versus_reference(results, args, key, same=()):
    """Each row's `key` against its `reference` row's (kstreams', or with --tune the same
    candidate's on Spark's defaults) among the rows with the same values of `same`: ms, or rows/s
    for key "rows_per_s" (then the reference's over the row's)."""
    rows_per_s = key == "rows_per_s"
    if args.tune:
        header = (
            f"{'defaults ÷ variant, rows/s' if rows_per_s else 'variant ÷ defaults, ms'} (<1: variant faster)"
        )
    else:
        header = f"{'kstreams ÷ candidate, rows/s' if rows_per_s else 'candidate ÷ kstreams, ms'} (>1: kstreams faster)"

    def cell(r):
        ours = reference(results, r, **{k: r.get(k) for k in same})
        if not ours or not ours[key] or not r[key]:
            return ""
        return f"{(ours[key] / r[key]) if rows_per_s else (r[key] / ours[key]):.2f}x"

    return Column(header, cell)


def throughput(results, args, thousands=False):
    """The columns of a rows/s regime: the median, the ratio to the reference, every round."""
    return [
        number("rows/s (median)", "rows_per_s"),
        versus_reference(results, args, "rows_per_s"),
        every_round("every round, rows/s", "rows_per_s", thousands),
    ]


def timing(results, args, header, key):
    """The columns of a time in ms: its median, the ratio to the reference, every round."""
    return [number(header, key), versus_reference(results, args, key), every_round("every round, ms", key)]


PEAK_STATE = [
    number("peak state rows", "peak_state_rows"),
    megabytes("peak state MB", "peak_state_bytes", 1),
]


def regime_table(results, lead, columns):
    """A regime's markdown table, printed and returned: a row per result, its `lead` columns (the
    candidate, and what else names the row), then its `columns` for a candidate that ran or its
    error for one whose every run failed."""
    everything = [*lead, *columns]
    lines = [
        "| " + " | ".join(c.header for c in everything) + " |",
        "|" + "|".join(c.align for c in everything) + "|",
    ]
    for r in results:
        cells = [c.cell(r) for c in lead]
        if "error" in r:
            cells += [f"failed: {r['error'][:120].replace('|', '/')}"] + [""] * (len(columns) - 1)
        else:
            cells += [c.cell(r) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print()
    print(table)
    return table


def finish(regime, title, table, method, results, args, plotter=None):
    """results/<regime>.json, the plot, and the regime's marked section of RESULTS.md (with
    --tune only results/<regime>_tune.json: an experiment, not the regime's result)."""
    if args.no_update:
        return
    command = command_line()
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    os.makedirs(RESULTS, exist_ok=True)
    name = f"{regime}_tune" if args.tune else regime
    with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
        json.dump({"regime": regime, "command": command, "when": when, "results": results}, f, indent=2)
    if args.tune:
        return
    image = ""
    if plotter is not None and plotter(results, os.path.join(RESULTS, plotter.image), args):
        image = f"\n\n![{regime}](results/{plotter.image})"
    update_section(regime, title, f"{when}, `{command.strip()}`\n\n{method}\n\n{table}{image}")


def update_section(regime, title, body):
    """Rewrite RESULTS.md's `<!-- regime:NAME -->` section (added before "## History" if new)."""
    path = os.path.join(BENCHMARKS, "RESULTS.md")
    text = "# Benchmark results\n\n## History\n"
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    start, end = f"<!-- regime:{regime} -->", f"<!-- /regime:{regime} -->"
    block = f"{start}\n{body}\n{end}"
    if start in text:
        text = re.sub(re.escape(start) + ".*" + re.escape(end), lambda _: block, text, flags=re.DOTALL)
    elif "## History" in text:
        text = text.replace("## History", f"## {title}\n\n{block}\n\n## History", 1)
    else:
        text = text.rstrip() + f"\n\n## {title}\n\n{block}\n"
    with open(path, "w") as f:
        f.write(text)


def pyplot():
    """matplotlib's pyplot on the Agg backend (files, no display), or None where matplotlib is not
    installed (`make bench` installs it; a regime then writes no plot and says so)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot)")
        return None
    return plt


def plot_long(results, path, args):
    """Median ms per micro-batch against live keys, one line per candidate."""
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name in dict.fromkeys(r["name"] for r in results):
        points = sorted(
            (r["live_keys"], r["median_ms"]) for r in results if r["name"] == name and "error" not in r
        )
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    ax.set_xticks(sorted({r["live_keys"] for r in results}))
    ax.set_xlabel("live keys")
    ax.set_ylabel(f"median ms per {args.batch_rows:,}-row micro-batch")
    ax.set_title(f"dedup, {args.long_interval} interval, growing live state (2 cores, local[2])")
    ax.set_ylim(bottom=0)
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1e6:g}M"))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


plot_long.image = "long_interval.png"


def plot_scaling(series, path, args):
    """rows/s and peak state MB per scaling point, one line per candidate."""
    plt = pyplot()
    if plt is None:
        return False
    points = list(dict.fromkeys((r["rows"], r["keys"]) for r in series))
    labels = [f"{rows / 1e6:g}M rows\n{keys:,} keys" for rows, keys in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    for name in dict.fromkeys(r["name"] for r in series):
        by_point = {(r["rows"], r["keys"]): r for r in series if r["name"] == name}
        xs = [i for i, p in enumerate(points) if p in by_point]
        left.plot(xs, [by_point[points[i]]["rows_per_s"] / 1000 for i in xs], marker="o", label=name)
        right.plot(xs, [by_point[points[i]]["peak_state_bytes"] / 1e6 for i in xs], marker="o", label=name)
    for ax, title in ((left, "thousand rows/s"), (right, "peak state MB")):
        ax.set_xticks(range(len(points)), labels, fontsize=7)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


plot_scaling.image = "scaling.png"
