"""The ``kstreams-spark`` console script (filled in below)."""


def main() -> None:
    raise SystemExit("not yet")
