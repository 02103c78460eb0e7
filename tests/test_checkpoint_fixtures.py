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
from kstreams_spark import KStreamsQueryError, read_state
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


def _operators_file(root: str) -> Path:
    return Path(root, "checkpoint", "kstreams", "operators.json")


@pytest.mark.parametrize("family", ["deduplicate_by_key", "deduplicate_by_key_value"])
def test_the_state_layout_is_read_from_spark_state_metadata_when_operators_json_is_lost(
    spark, tmp_path, family
):
    # a layout-1 checkpoint (the fixture) whose kstreams/operators.json is gone, as a driver killed
    # between its delete and rename on HDFS leaves it: taken for a new operator it would get layout
    # 2 and read its state as empty; Spark's state metadata says layout 1
    root = os.path.join(ROOT, family)
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(FIXTURES, family), root)
    try:
        _operators_file(root).unlink()
        resumed = StreamRun(spark, root, FAMILIES[family])
        resumed.files = WRITTEN
        resumed.add_batch(BATCHES[WRITTEN])
        resumed.run()
        fresh = run_batches(spark, str(tmp_path), family, BATCHES)
        assert rows(resumed) == rows(fresh)
        # recorded again, in the layout its state is in
        assert "state_layouts" not in json.loads(_operators_file(root).read_text())
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("family", ["deduplicate_by_key", "deduplicate_by_key_value"])
def test_a_layout_2_checkpoint_whose_operators_json_lost_its_layout_stays_in_layout_2(
    spark, tmp_path, family
):
    # a release before layouts rewriting operators.json drops `state_layouts`; read as layout 1, the
    # state would read as empty (a@9 forwarded: only the stored stream time makes it late)
    run = StreamRun(spark, str(tmp_path / "rewritten"), FAMILIES[family])
    for batch in BATCHES[:WRITTEN]:
        run.add_batch(batch)
        run.run()
    recorded = json.loads(_operators_file(run.root).read_text())
    assert recorded.pop("state_layouts") == ["2"]
    _operators_file(run.root).write_text(json.dumps(recorded))
    # as a release writing through Hadoop's file system would leave it: its checksum file matches
    _operators_file(run.root).with_name(".operators.json.crc").unlink()
    run.add_batch(BATCHES[WRITTEN])
    run.run()
    fresh = run_batches(spark, str(tmp_path / "fresh"), family, BATCHES)
    assert rows(run) == rows(fresh)
    assert json.loads(_operators_file(run.root).read_text())["state_layouts"] == ["2"]


def test_an_operators_json_edited_by_hand_or_broken_is_refused_naming_the_file_and_loses_nothing(
    spark, tmp_path
):
    # a hand edit keeps Hadoop's checksum file beside it, whose raw ChecksumException was all a user
    # got; broken JSON gave Jackson's. Each restart is refused in one message naming the file and
    # what to do; done, the query continues as the one never stopped
    family = "deduplicate_by_key"
    run = StreamRun(spark, str(tmp_path / "edited"), FAMILIES[family])
    run.add_batch(BATCHES[0])
    run.run()
    path = _operators_file(run.root)
    crc = path.with_name(".operators.json.crc")
    path.write_text(path.read_text().replace(" : ", ": "))  # the same JSON, other bytes
    run.add_batch(BATCHES[1])
    with pytest.raises(KStreamsQueryError) as e:
        run.run()
    assert (
        f"the checkpoint's list of kstreams operators file:{path} does not match its checksum file "
        f"file:{crc}: it was changed other than through Hadoop's file system (edited by hand?) or is "
        f"damaged. If the change was meant, delete file:{crc} and restart; if not, restore the file"
    ) in str(e.value)
    crc.unlink()
    run.run()

    good = path.read_text()
    broken = good[: good.index("[")] + '[ "deduplicate_by_key'
    path.write_text(broken)
    crc.unlink(missing_ok=True)  # (a run that records nothing new leaves the file unwritten)
    run.add_batch(BATCHES[2])
    with pytest.raises(KStreamsQueryError) as e:
        run.run()
    # where the JSON ends early: its last line, one column after its last character
    line, column = broken.count("\n") + 1, len(broken.rsplit("\n", 1)[-1]) + 1
    assert (
        f"the checkpoint's list of kstreams operators file:{path} is not valid JSON: Unexpected "
        f"end-of-input in VALUE_STRING (line {line}, column {column}). Mend it, restore the file"
    ) in str(e.value)
    path.write_text(good)
    run.run()
    assert rows(run) == rows(run_batches(spark, str(tmp_path / "fresh"), family, BATCHES))
