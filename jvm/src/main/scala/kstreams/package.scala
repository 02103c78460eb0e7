/** Kafka Streams semantics on Spark Structured Streaming. Every public type is in a file named
  * after it in this package; how each concept is built is under `kstreams.internal`, one package
  * per concept, one operator (planning object + processor) per file.
  *
  * {{{
  * import kstreams._
  * val deduped = KStream(kafkaDf).deduplicateByKey("10 minutes").df
  * }}}
  *
  * | concept (spec section, KIP) | public API | built in |
  * |---|---|---|
  * | records, arrival order, stream time (1) | [[KStream]], [[StreamColumns]], [[NullTimestamps]] | `internal/plan/InputColumns`, `PartitionInput`, `CompactInput`, `ArrivalMerge`, `Keyed`, `ResolvedColumns`, `SparkSessionChecks`, `internal/state/OrderCheck` |
  * | what operators count and drop (the manual, "Metrics") | | `internal/plan/Stateful`, `HelperColumns` (`DropReasons`) |
  * | dedup by key, key + value, global (2, KIP-655) | [[KStream]]`.deduplicate*` | `internal/dedup/Deduplicate`, `PerPartitionDedup` (`EntryMap`), `GlobalDedup` (`SpreadInput`, `IdMap`, `GlobalLog`), `SpillableStore`, `DedupCaches`, `TimeBucketChunks` |
  * | windowed distinct (3) | [[TimeWindowedKStream]], [[SessionWindowedKStream]]`.distinct` | `internal/window/WindowedDistinct` |
  * | late records: forward, drop or side output (2, 3; the manual, "Late records") | [[LateRecords]], [[KStream]]`.sideOutput`, `.withSideOutput`, [[KTable]]`.sideOutput`, `.withSideOutput` | `internal/dedup/CompactEmitter`, `internal/window/WindowedDistinct`, `internal/aggregate/Aggregate` (`LateRows`) |
  * | exactly once to Kafka (8; the manual, "Exactly once to Kafka") | [[KStream]]`.to(topic, exactlyOnce)` | `internal/sink/ExactlyOnceKafkaSink` |
  * | sequence dedup (4) | [[KStream]]`.deduplicateBySequence` | `internal/dedup/DeduplicateBySequence` |
  * | aggregations and their timestamps (5, KIP-258/259) | [[KGroupedStream]], [[TimeWindows]], [[SessionWindows]] | `internal/aggregate/Aggregate`, `WindowedAggregate` |
  * | stream-stream joins (5) | [[KStream]]`.join`, [[JoinWindows]] | `internal/join/StreamJoin`, `JoinKind` |
  * | tables, emit on change (6, KIP-557), table-table joins (5) | [[KTable]] | `internal/table/TableSource`, `TableJoin` |
  * | processor API (7, KIP-28) | `kstreams.processor` (`Processor`, `Topology`...) | `internal/runner/ProcessorRunner` (`ProcessorPlan`), `TopologyGraph` |
  * | state, eviction (8) | | `internal/state/Sweeper`, `PartitionClocks`, `StreamTimes`, `internal/plan/TaskClocks` |
  * | restarts: a checkpoint's operators (8) | [[KStream]]`.configure` | `internal/plan/OperatorDescriptor`, `CheckpointOperators` |
  * | reading a checkpoint: its operators, the state of dedup, windowed distinct and tables; moving it to another number of state partitions (2, 3, 6, 8; the manual, "Operating a query") | [[CheckpointState]] | `internal/inspect/OperatorState`, `DedupState`, `WindowState`, `TableState`, `internal/plan/CheckpointOperators`, `internal/operate/Repartition` |
  * | Python | the types above, called from `kstreams_spark` | `PythonAPI` (what py4j cannot express) |
  */
package object kstreams
