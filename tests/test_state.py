"""Reading a dedup operator's state from its checkpoint (issue 39): ``read_state``,
``checkpoint_operators`` and ``kstreams-spark state show``.

The expected entries are worked out by hand from spec section 2 (interval 10 s): an entry is a
key's newest stored record; it is dead once its partition's stream time has passed its timestamp
plus the interval, whether or not eviction has removed it. Then the state read must predict what
the operator does with the next records: each key shown, sent again within the interval, is
dropped; keys not shown are forwarded.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest
from kstreams_spark import (
    KStream,
    KStreamsError,
    SessionWindows,
    TimeWindows,
    checkpoint_operators,
    read_state,
)
from pyspark.sql import functions as F
from streams import BASE, Rec, StreamRun, with_offsets

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kstreams-spark")
MEMORY_CONF = "spark.kstreams.dedup.memory"

# Partition 0: a@1 b@2 a@3(dup) | c@15 d@16 b@17 -- stream time 17: a@1 and b@2, stored by the first
# micro-batch, are dead now but still in their time bucket [0 s, 10 s), which eviction drops only
# once stream time passes 20 s; b's live entry is b@17. Partition 1: x@100 y@95 x@104(dup) -- stream
# time 104, both entries live.
FIRST = [Rec("a", 1), Rec("b", 2), Rec("a", 3)]
SECOND = [Rec("c", 15), Rec("x", 100, partition=1), Rec("y", 95, partition=1), Rec("x", 104, partition=1)]
SECOND += [Rec("d", 16), Rec("b", 17)]


def at(seconds: float) -> dt.datetime:
    return (BASE + dt.timedelta(seconds=seconds)).replace(tzinfo=None)


# (partition, key, timestamp s, offset, stream time s)
EXPECTED = [
    (0, "c", 15, 3, 17),
    (0, "d", 16, 4, 17),
    (0, "b", 17, 5, 17),
    (1, "y", 95, 1, 104),
    (1, "x", 100, 0, 104),
]


def dedup_run(spark, root, op=None) -> StreamRun:
    records = with_offsets(FIRST + SECOND)
    run = StreamRun(spark, root, op or (lambda d: KStream(d).deduplicate_by_key("10 seconds").df))
    run.add_batch(records[: len(FIRST)])
    run.run()  # a restart from the checkpoint between the two micro-batches
    run.add_batch(records[len(FIRST) :])
    run.run()
    return run


def rows_of(state) -> list[tuple]:
    return [
        (r.partition, r.key, r.timestamp, r.offset, r.live_until, r.stream_time)
        for r in state.orderBy("partition", "timestamp").collect()
    ]


@pytest.fixture(params=["in_memory", "spilled"])
def memory(request, spark):
    """The store's two layouts: the time-bucket chunks alone, and a group spilled to one RocksDB
    row per key (a 1-byte budget spills every group at its first micro-batch)."""
    if request.param == "spilled":
        spark.conf.set(MEMORY_CONF, "1")
    yield request.param
    spark.conf.unset(MEMORY_CONF)


def test_read_state_gives_each_live_entry_and_predicts_the_next_decisions(spark, tmp_path, memory):
    run = dedup_run(spark, str(tmp_path))
    checkpoint = os.path.join(str(tmp_path), "checkpoint")
    assert checkpoint_operators(spark, checkpoint) == [
        "deduplicate_by_key(partition=partition, interval=PT10S, key=key)"
    ]
    state = read_state(spark, checkpoint)
    assert state.columns == ["partition", "key", "timestamp", "offset", "live_until", "stream_time"]
    assert rows_of(state) == [(p, k, at(t), o, at(t + 10), at(s)) for p, k, t, o, s in EXPECTED]
    if memory == "spilled":
        spilled = spark.read.format("statestore").option("stateVarName", "entries").load(checkpoint)
        assert spilled.count() > 0  # the entries were read from the spilled rows too

    # the next micro-batch: every key read, again 1 s after its entry (a duplicate by the entry);
    # a key whose entry is dead (a) and a new one (z): forwarded
    before = run.output().count()
    offsets = {0: 6, 1: 3}
    again = []
    for p, k, t, _, _ in EXPECTED:
        again.append(Rec(k, t + 1, partition=p, offset=offsets[p], value=f"again-{k}"))
        offsets[p] += 1
    again += [Rec("a", 18, partition=0, offset=offsets[0], value="new-a")]
    again += [Rec("z", 99, partition=1, offset=offsets[1], value="new-z")]
    run.add_batch(again)
    run.run()
    out = run.output()
    assert out.count() == before + 2
    assert sorted(r.value for r in out.where("value like 'again-%' or value like 'new-%'").collect()) == [
        "new-a",
        "new-z",
    ]


def test_read_state_of_deduplicate_by_key_value_shows_key_and_id(spark, tmp_path):
    records = with_offsets([Rec("a", 1, value="e1"), Rec("a", 2, value="e2"), Rec("a", 3, value="e1")])
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).deduplicate_by_key_value("value", "10 s").df)
    run.add_batch(records)
    run.run()
    checkpoint = os.path.join(str(tmp_path), "checkpoint")
    state = read_state(spark, checkpoint)
    assert state.columns == ["partition", "key", "id", "timestamp", "offset", "live_until", "stream_time"]
    assert [tuple(r) for r in state.collect()] == [
        (0, "a", "e1", at(1), 0, at(11), at(3)),
        (0, "a", "e2", at(2), 1, at(12), at(3)),
    ]

    # a checkpoint of a release that did not record the key's types: the encoded key until its
    # query runs again, which records them
    recorded = os.path.join(checkpoint, "kstreams", "operators.json")
    with open(recorded) as f:
        file = json.load(f)
    del file["state_types"]
    with open(recorded, "w") as f:
        json.dump(file, f)
    os.remove(os.path.join(checkpoint, "kstreams", ".operators.json.crc"))  # Hadoop's checksum of it
    assert read_state(spark, checkpoint).columns[:2] == ["partition", "key_bytes"]
    run.add_batch([Rec("a", 4, offset=3, value="e3")])
    run.run()
    state = read_state(spark, checkpoint)
    assert [(r.key, r.id, r.offset) for r in state.collect()] == [
        ("a", "e1", 0),
        ("a", "e2", 1),
        ("a", "e3", 3),
    ]


def test_read_state_of_deduplicate_shows_each_id_with_the_partitions_it_is_live_for(spark, tmp_path, memory):
    """The global store (id = value, 10 s), two partitions. After the two micro-batches partition 0's
    stream time is 30 and partition 1's is 8, so x@1, y@2 and w@8 are live for partition 1 only
    (stream time at most 11, 12, 18) and z@30 for both; x@5 on partition 1 was x@1's duplicate."""
    first = [Rec("k", 1, value="x"), Rec("k", 2, value="y"), Rec("k", 5, partition=1, value="x")]
    second = [Rec("k", 30, value="z"), Rec("k", 8, partition=1, value="w")]
    records = with_offsets(first + second)
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).deduplicate("value", "10 seconds").df)
    run.add_batch(records[:3])
    run.run()
    run.add_batch(records[3:])
    run.run()
    state = read_state(spark, str(tmp_path / "checkpoint"))
    assert state.columns == [
        "group",
        "id",
        "timestamp",
        "partition",
        "offset",
        "live_until",
        "live_for_partitions",
    ]
    rows = state.collect()
    assert all(0 <= r.group < 64 for r in rows)
    assert [tuple(r)[1:] for r in rows] == [
        ("x", at(1), 0, 0, at(11), [1]),
        ("y", at(2), 0, 1, at(12), [1]),
        ("w", at(8), 1, 1, at(18), [1]),
        ("z", at(30), 0, 2, at(40), [0, 1]),
    ]
    # as the state says: x@3 from partition 1 is x@1's duplicate, z@31 from partition 0 z@30's; y@3
    # from partition 0 is not (y@2 is not live for it: late, forwarded); q is new
    run.add_batch(
        [
            Rec("k", 3, partition=1, offset=2, value="x"),
            Rec("k", 3, offset=3, value="y"),
            Rec("k", 31, offset=4, value="z"),
            Rec("k", 9, partition=1, offset=3, value="q"),
        ]
    )
    run.run()
    assert sorted((r.value, r.partition, r.offset) for r in run.output().collect()) == [
        ("q", 1, 3),
        ("w", 1, 1),
        ("x", 0, 0),
        ("y", 0, 1),
        ("y", 0, 3),
        ("z", 0, 2),
    ]


def test_read_state_of_windowed_distinct_shows_the_open_windows_and_predicts_the_next_decisions(
    spark, tmp_path
):
    """Tumbling windows of 10 s with 2 s of grace: partition 0 has a@1 a@3 | c@15 a@16, so at
    stream time 16 a's window [0, 10) is closed (10 + 2 <= 16) and [10, 20) is open for a and c
    until stream time reaches 22; partition 1 has x@100."""
    windows = TimeWindows.of_size_and_grace(dt.timedelta(seconds=10), dt.timedelta(seconds=2))
    run = StreamRun(
        spark, str(tmp_path), lambda d: KStream(d).group_by_key().windowed_by(windows).distinct().df
    )
    records = with_offsets([Rec("a", 1), Rec("a", 3), Rec("c", 15), Rec("x", 100, partition=1), Rec("a", 16)])
    run.add_batch(records[:2])
    run.run()
    run.add_batch(records[2:])
    run.run()
    state = read_state(spark, os.path.join(str(tmp_path), "checkpoint"))
    assert state.columns == ["partition", "key", "window_start", "window_end", "open_until", "stream_time"]
    almost = dt.timedelta(microseconds=1)
    assert [tuple(r) for r in state.collect()] == [
        (0, "a", at(10), at(20), at(22) - almost, at(16)),
        (0, "c", at(10), at(20), at(22) - almost, at(16)),
        (1, "x", at(100), at(110), at(112) - almost, at(100)),
    ]
    # a record of an open window: a duplicate; of a's closed window: late; a new key: forwarded
    run.add_batch(
        [
            Rec("a", 17, offset=4, value="open-a"),
            Rec("a", 5, offset=5, value="closed-a"),
            Rec("d", 18, offset=6, value="new-d"),
            Rec("x", 109, partition=1, offset=1, value="open-x"),
        ]
    )
    run.run()
    assert [
        r.value for r in run.output().where("offset >= 4 or partition = 1 and offset >= 1").collect()
    ] == ["new-d"]


def test_read_state_of_session_distinct_shows_the_sessions_that_can_still_take_records(spark, tmp_path):
    windows = SessionWindows.of_inactivity_gap_with_no_grace(dt.timedelta(seconds=5))
    run = StreamRun(
        spark, str(tmp_path), lambda d: KStream(d).group_by_key().windowed_by(windows).distinct().df
    )
    run.add_batch(
        with_offsets([Rec("a", 1), Rec("a", 3), Rec("c", 15), Rec("x", 100, partition=1), Rec("a", 16)])
    )
    run.run()
    # a's session [1, 3] took its last record at stream time 8 (3 + gap): at 16 it is gone
    assert [tuple(r) for r in read_state(spark, os.path.join(str(tmp_path), "checkpoint")).collect()] == [
        (0, "c", at(15), at(15), at(20), at(16)),
        (0, "a", at(16), at(16), at(21), at(16)),
        (1, "x", at(100), at(100), at(105), at(100)),
    ]


def test_read_state_of_a_table_shows_each_key_current_row_and_predicts_idempotent_updates(spark, tmp_path):
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).to_table().df)
    records = [
        Rec("a", 1, value="v0"),
        Rec("b", 2, value="v1"),
        Rec("a", 3, value="v2"),
        Rec("c", 4, value="v3"),
    ]
    run.add_batch(with_offsets(records + [Rec("b", 5, value=None)]))  # b deleted
    run.run()
    state = read_state(spark, os.path.join(str(tmp_path), "checkpoint"))
    assert state.columns == ["key", "value", "timestamp"]
    assert [tuple(r) for r in state.collect()] == [("a", "v2", at(3)), ("c", "v3", at(4))]
    # a's value again, later: idempotent, dropped; c changed and b (no row) are forwarded
    run.add_batch(
        [
            Rec("a", 6, offset=5, value="v2"),
            Rec("c", 7, offset=6, value="other"),
            Rec("b", 8, offset=7, value="v9"),
        ]
    )
    run.run()
    later = run.output().where(F.col("timestamp") >= at(6))
    assert sorted((r.key, r.value) for r in later.collect()) == [
        ("b", "v9"),
        ("c", "other"),
    ]


def test_read_state_refuses_what_it_cannot_read_in_one_line(spark, tmp_path):
    run = StreamRun(spark, str(tmp_path), lambda d: KStream(d).group_by_key().count().to_stream().df)
    run.add_batch(with_offsets([Rec("a", 1)]))
    run.run()
    checkpoint = os.path.join(str(tmp_path), "checkpoint")
    (count,) = checkpoint_operators(spark, checkpoint)
    with pytest.raises(KStreamsError) as e:
        read_state(spark, checkpoint)
    assert str(e.value) == (
        f"operator #1 of {checkpoint} is {count}; reading state is supported for deduplicate_by_key, "
        "deduplicate_by_key_value, deduplicate, windowed_distinct, session_distinct, to_table only"
    )
    out = subprocess.run([SCRIPT, "state", "show", checkpoint], capture_output=True, text=True, timeout=300)
    assert (out.returncode, out.stderr) == (2, f"kstreams-spark state: error: {e.value}\n")
    with pytest.raises(KStreamsError) as e:
        read_state(spark, checkpoint, operator=2)
    assert (
        str(e.value) == f"operator #2 is not in {checkpoint}: it records 1 kstreams operator(s), #1 {count}"
    )
    with pytest.raises(KStreamsError) as e:
        read_state(spark, str(tmp_path / "in"))
    assert str(e.value) == (
        f"{tmp_path}/in is not the checkpoint of a query with kstreams operators "
        f"(no {tmp_path}/in/kstreams/operators.json)"
    )


def test_state_show_prints_the_entries_and_what_a_key_would_get(spark, tmp_path):
    """The CLI's table and its answer for a key (read_state's rows are checked in full above)."""
    dedup_run(spark, str(tmp_path))
    checkpoint = os.path.join(str(tmp_path), "checkpoint")
    out = subprocess.run(
        [SCRIPT, "state", "show", checkpoint, "--key", "b"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"checkpoint {checkpoint}: 1 kstreams operator(s)",
        "  #1 deduplicate_by_key(partition=partition, interval=PT10S, key=key)",
        "operator #1: live entries with key 'b', as of the last committed micro-batch",
        "  partition  key  timestamp            offset  live_until           stream_time",
        "  0          b    2026-01-01 00:00:17  5       2026-01-01 00:00:27  2026-01-01 00:00:17",
        "partition 0: a record with key 'b' and a timestamp within 10 s of 2026-01-01 00:00:17 is dropped "
        "as a duplicate while the partition's stream time is at most 2026-01-01 00:00:27; any other is "
        "forwarded (a late one as the operator's late_records says)",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--operator", "0"], "--operator is an operator number from 1, got 0"),
        (["--limit", "0"], "--limit must be at least 1, got 0"),
    ],
)
def test_state_show_bad_arguments_are_one_line_and_exit_2(tmp_path, args, message):
    out = subprocess.run(
        [SCRIPT, "state", "show", str(tmp_path), *args], capture_output=True, text=True, timeout=60
    )
    assert (out.returncode, out.stdout, out.stderr) == (2, "", f"kstreams-spark state: error: {message}\n")


def test_state_show_refuses_a_path_that_is_not_a_kstreams_checkpoint(tmp_path):
    for path, message in [
        (tmp_path / "nothing", f"no checkpoint at {tmp_path}/nothing (not a directory)"),
        (
            tmp_path,
            f"{tmp_path} is not the checkpoint of a query with kstreams operators (no kstreams/operators.json in it)",
        ),
    ]:
        out = subprocess.run([SCRIPT, "state", "show", str(path)], capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stdout, out.stderr) == (
            2,
            "",
            f"kstreams-spark state: error: {message}\n",
        )
