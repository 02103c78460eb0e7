"""Checkpoints written by an earlier release keep working (issue 39): each fixture of
tests/checkpoint_fixtures.py (one query per operator family, two micro-batches, written by the
release in tests/fixtures/checkpoints/RELEASE) is restarted with this code for a third micro-batch,
and its whole output must equal that of the same three micro-batches run by this code from an
empty checkpoint: a restart across releases changes nothing a user sees."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from checkpoint_fixtures import BATCHES, FAMILIES, FIXTURES, READS, ROOT, WRITTEN, run_batches
from kstreams_spark import read_state
from streams import StreamRun

# the families read_state shows; their checkpoint's state stays in the layout it was first written
# with (a fixture's per-partition dedup keeps layout 1, a new checkpoint's gets layout 2: the
# manual, "Operating a query"), and what it shows must not depend on that
READABLE = {
    "deduplicate_by_key",
    "deduplicate_by_key_value",
    "deduplicate",
    "windowed_distinct",
    "session_distinct",
    "to_table",
}


def rows(run: StreamRun) -> list[tuple]:
    return sorted((tuple(r) for r in run.output().collect()), key=repr)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_checkpoint_of_the_last_release_continues_as_if_never_stopped(spark, tmp_path, family):
    root = os.path.join(ROOT, family)
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(FIXTURES, family), root)
    try:
        resumed = StreamRun(spark, root, FAMILIES[family])
        resumed.files = WRITTEN  # the fixture's input files are batch-00000 and batch-00001
        resumed.add_batch(BATCHES[WRITTEN])
        resumed.run()
        fresh = run_batches(spark, str(tmp_path), family, BATCHES)
        # only the new micro-batch's records were read: the fixture's files count as processed
        reads = READS.get(family, 1)
        assert sum(p["numInputRows"] for p in resumed.progress) == reads * len(BATCHES[WRITTEN])
        assert rows(fresh), "the family's query forwards nothing: the comparison would prove nothing"
        assert rows(resumed) == rows(fresh)
        if family in ("deduplicate_by_key", "deduplicate_by_key_value"):
            # the fixture stays in layout 1 (no state_layouts recorded: 7 state variables), the
            # fresh checkpoint gets layout 2; a fixture rewritten by a later release would lose
            # the only test of layout 1 here
            layouts = [
                json.loads(Path(r.root, "checkpoint", "kstreams", "operators.json").read_text()).get(
                    "state_layouts"
                )
                for r in (resumed, fresh)
            ]
            assert layouts == [None, ["2"]]
        if family in READABLE:
            shown = [
                sorted(map(tuple, read_state(spark, os.path.join(r.root, "checkpoint")).collect()), key=repr)
                for r in (resumed, fresh)
            ]
            assert shown[0], "nothing live in the state: the comparison would prove nothing"
            assert shown[0] == shown[1]
    finally:
        shutil.rmtree(root, ignore_errors=True)
