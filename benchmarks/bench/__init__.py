"""kstreams-spark's benchmarks (`python benchmarks/bench --help`; `make bench` runs every regime).
The modules and regimes are listed in `__main__`'s docstring."""

import os

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: RESULTS.md
REPO = os.path.dirname(BENCHMARKS)  # the repository: tests/, jvm-bench/, .venv-flink/
