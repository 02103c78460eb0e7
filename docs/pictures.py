"""The guide's pictures of the rules (docs/guide/pictures/*.svg): the dedup verdicts come from
tests/reference.py (spec section 2 transcribed, the tests' oracle, not the code under test); the
windows picture is spec section 3's example with the results the spec states, entered by hand.

    python docs/pictures.py            # writes the SVGs
    python docs/pictures.py --check    # fails if a committed SVG differs (tests/test_docs.py)
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from html import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "guide", "pictures")
sys.path.insert(0, os.path.join(ROOT, "tests"))

from reference import dedup_reference_with_late  # noqa: E402

# colours of the verdicts, and their legend text
FORWARDED, DROPPED, LATE, REPLAY = "#2e7d32", "#9e9e9e", "#ef6c00", "#1565c0"
LEFT, RIGHT, ROW_HEIGHT, TOP = 150, 30, 90, 60


@dataclass(frozen=True)
class Rec:
    """A record as tests/reference.py reads it; `label` is what the picture writes under it."""

    key: str
    t: float
    partition: int
    offset: int
    label: str = ""


class Svg:
    """A timeline: one row per partition (or window kind), seconds on the x axis."""

    def __init__(self, title: str, t_from: float, t_to: float, rows: list[str], width: int = 820) -> None:
        self.width, self.t_from, self.t_to, self.rows = width, t_from, t_to, rows
        self.last_label: dict[int, tuple[float, int]] = {}  # row -> (x, level) of its last label
        self.height = TOP + ROW_HEIGHT * len(rows) + 70
        self.parts = [
            f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
        ]
        for i, name in enumerate(rows):
            y = self.y(i)
            for j, line in enumerate(name.split("\n")):
                self.parts.append(f'<text x="10" y="{y + 4 + 14 * j}" font-size="12">{escape(line)}</text>')
            self.parts.append(
                f'<line x1="{LEFT}" y1="{y}" x2="{width - RIGHT}" y2="{y}" stroke="#444" stroke-width="1"/>'
            )
        axis = TOP + ROW_HEIGHT * len(rows) + 5
        step = 5 if t_to - t_from <= 60 else 10
        t = t_from - t_from % step
        while t <= t_to:
            if t >= t_from:
                x = self.x(t)
                self.parts.append(f'<line x1="{x}" y1="{axis - 4}" x2="{x}" y2="{axis + 4}" stroke="#444"/>')
                self.parts.append(
                    f'<text x="{x}" y="{axis + 18}" font-size="11" text-anchor="middle">{t:g} s</text>'
                )
            t += step

    def x(self, t: float) -> float:
        return round(LEFT + (t - self.t_from) / (self.t_to - self.t_from) * (self.width - LEFT - RIGHT), 1)

    def y(self, row: int) -> int:
        return TOP + ROW_HEIGHT * row + 20

    def span(self, row: int, t1: float, t2: float, colour: str, text: str, lift: int = 14) -> None:
        """A bar over row `row` from t1 to t2 (an entry's live interval, a window)."""
        y = self.y(row) - lift
        x1, x2 = self.x(t1), self.x(t2)
        self.parts.append(
            f'<rect x="{x1}" y="{y - 4}" width="{round(x2 - x1, 1)}" height="8" fill="{colour}" opacity="0.25"/>'
        )
        self.parts.append(f'<text x="{x1}" y="{y - 7}" font-size="10" fill="{colour}">{escape(text)}</text>')

    def mark(self, row: int, t: float, colour: str, text: str, cross: bool = False) -> None:
        """A record at t on row `row`: a dot (a cross when dropped) and its label under it."""
        x, y = self.x(t), self.y(row)
        if cross:
            self.parts.append(
                f'<path d="M{x - 5},{y - 5} L{x + 5},{y + 5} M{x - 5},{y + 5} L{x + 5},{y - 5}" '
                f'stroke="{colour}" stroke-width="2.5"/>'
            )
        else:
            self.parts.append(f'<circle cx="{x}" cy="{y}" r="6" fill="{colour}"/>')
        # a label close to the row's previous one goes a level lower, so that they do not overlap
        last_x, last_level = self.last_label.get(row, (-1e9, 1))
        level = 1 - last_level if x - last_x < 50 else 0
        self.last_label[row] = (x, level)
        for i, line in enumerate(text.split("\n")):
            self.parts.append(
                f'<text x="{x}" y="{y + 20 + 24 * level + 12 * i}" font-size="10" '
                f'text-anchor="middle">{escape(line)}</text>'
            )

    def legend(self, items: list[tuple[str, str, bool]]) -> None:
        y, x = self.height - 14, LEFT
        for colour, text, cross in items:
            if cross:
                self.parts.append(
                    f'<path d="M{x - 4},{y - 8} L{x + 4},{y} M{x - 4},{y} L{x + 4},{y - 8}" stroke="{colour}" '
                    'stroke-width="2.5"/>'
                )
            else:
                self.parts.append(f'<circle cx="{x}" cy="{y - 4}" r="5" fill="{colour}"/>')
            self.parts.append(f'<text x="{x + 10}" y="{y}" font-size="11">{escape(text)}</text>')
            x += 24 + 6 * len(text)

    def render(self) -> str:
        body = "\n  ".join(self.parts)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="sans-serif">\n'
            f'  <rect width="100%" height="100%" fill="white"/>\n  {body}\n</svg>\n'
        )


LEGEND = [
    (FORWARDED, "forwarded (stored)", False),
    (LATE, "late: forwarded, not stored", False),
    (REPLAY, "same offset again: forwarded", False),
    (DROPPED, "duplicate: dropped", True),
]


def verdicts(records: list[Rec], interval: float, scope: str = "partition") -> dict[Rec, str]:
    """Each record's verdict by tests/reference.py: forwarded, late, replay or dropped."""
    forwarded, late = dedup_reference_with_late(records, interval, scope)
    seen_offsets: set[tuple[int, int]] = set()
    out = {}
    for r in records:
        again = (r.partition, r.offset) in seen_offsets
        seen_offsets.add((r.partition, r.offset))
        if r not in forwarded:
            out[r] = "dropped"
        elif r in late:
            out[r] = "late"
        else:
            out[r] = "replay" if again else "forwarded"
    return out


COLOURS = {"forwarded": FORWARDED, "late": LATE, "replay": REPLAY, "dropped": DROPPED}


def dedup_interval() -> str:
    """deduplicate_by_key("10 seconds") on one partition: a duplicate, a record past the interval,
    a late record, and a record delivered again after a failure, with each stored entry's life."""
    records = [
        Rec("a", 100, 0, 0, "a@100\noffset 0"),
        Rec("a", 108, 0, 1, "a@108"),
        Rec("a", 115, 0, 2, "a@115\noffset 2"),
        Rec("c", 98, 0, 3, "c@98"),
        Rec("a", 115, 0, 2, "a@115, offset 2\nagain"),
    ]
    got = verdicts(records, 10)
    svg = Svg(
        'deduplicate_by_key("10 seconds"), one partition (spec section 2)',
        90,
        130,
        ["partition 0", "the same records again\nafter a failure"],
    )
    # a stored entry lives until the partition's stream time passes its timestamp + the interval
    svg.span(0, 100, 110, FORWARDED, "a@100 lives until stream time 110")
    svg.span(0, 115, 125, FORWARDED, "a@115 lives until 125")
    for r in records[:4]:
        svg.mark(0, r.t, COLOURS[got[r]], r.label, cross=got[r] == "dropped")
    replay = records[4]
    svg.mark(1, replay.t, COLOURS[got[replay]], replay.label, cross=got[replay] == "dropped")
    svg.legend(LEGEND)
    return svg.render()


def stream_time_per_partition() -> str:
    """deduplicate("key", "10 seconds") (global) over two partitions, one lagging: each record is judged
    by its own partition's stream time, so the lagging partition's records are neither late nor
    lost, and a duplicate from either side is dropped."""
    records = [
        Rec("x", 160, 0, 0, "x@160"),
        Rec("y", 165, 0, 1, "y@165"),
        Rec("z", 170, 0, 2, "z@170"),
        Rec("y", 100, 1, 0, "y@100"),
        Rec("x", 104, 1, 1, "x@104"),
        Rec("x", 110, 1, 2, "x@110"),
        Rec("y", 168, 1, 3, "y@168"),
    ]
    got = verdicts(records, 10, scope="global")
    svg = Svg(
        'deduplicate("key", "10 seconds"), global, over two partitions, partition 1 a minute behind',
        95,
        175,
        ["partition 0", "partition 1 (lagging)"],
    )
    svg.span(
        1, 100, 110, "#555", "partition 1's own stream time at x@110 is 110: x@104 lives, x@110 is dropped"
    )
    for r in records:
        svg.mark(r.partition, r.t, COLOURS[got[r]], r.label, cross=got[r] == "dropped")
    svg.legend([LEGEND[0], LEGEND[3]])
    return svg.render()


def windows() -> str:
    """Spec section 3's example, one key: tumbling 10 s and session gap 10 s / 9 s distinct."""
    times = [4, 5, 6, 23, 22, 24, 34, 33, 32, 7, 22, 35]
    rows = ["tumbling 10 s", "session gap 10 s", "session gap 9 s"]
    svg = Svg("windowed distinct, one key: 4,5,6, 23,22,24, 34,33,32, 7,22,35 (spec section 3)", 0, 40, rows)
    # the spec's stated results: tumbling forwards 4 [0,10), 23 [20,30), 34 [30,40); sessions with
    # a 10 s gap 4 and 23 (34 is within 10 s of 24: it joins 22-24); with a 9 s gap 4, 23 and 34,
    # until 32 bridges 22-24 and 33-34. The second 7 and 22 come when stream time is 34: their
    # windows and sessions have closed (grace 0), so they are late; 35 repeats its window.
    forwarded = {0: {4, 23, 34}, 1: {4, 23}, 2: {4, 23, 34}}
    for start in (0, 20, 30):
        svg.span(0, start, start + 10, "#555", f"[{start}, {start + 10})")
    for row in (1, 2):
        svg.span(row, 4, 6, "#555", "session 4-6")
        svg.span(row, 22, 35, "#555", "session 22-35" + (" (32 bridges 22-24 and 33-34)" if row == 2 else ""))
    for row in range(3):
        marked: set[int] = set()
        for t in times:
            first = t in forwarded[row] and t not in marked
            marked.add(t)
            svg.mark(row, t, FORWARDED if first else DROPPED, "", cross=not first)
    svg.legend(
        [
            (FORWARDED, "starts its window or session: forwarded", False),
            (DROPPED, "in one already, or late: dropped", True),
        ]
    )
    return svg.render()


PICTURES = {
    "dedup-interval.svg": dedup_interval,
    "stream-time-per-partition.svg": stream_time_per_partition,
    "windows.svg": windows,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed picture differs")
    args = parser.parse_args()
    stale = []
    os.makedirs(OUT, exist_ok=True)
    for name, draw in PICTURES.items():
        path = os.path.join(OUT, name)
        svg = draw()
        if args.check:
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != svg:
                stale.append(name)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(svg)
    if stale:
        raise SystemExit(f"pictures out of date: {', '.join(stale)}; run python docs/pictures.py")


if __name__ == "__main__":
    main()
