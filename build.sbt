// kstreams-spark: the Scala core. Spark itself is not resolved from a registry: Spark 4.3.0 is
// compiled against exactly the jars that ship inside the pinned pyspark==4.3.0 wheel (Spark 4.3.0
// artifacts are not published to Maven Central as of this writing), so the JVM and Python sides can
// never disagree on the Spark version. The Makefile sets SPARK_JARS to that folder.
ThisBuild / organization := "io.github.kstreams-spark"
ThisBuild / version := "0.1.0"
ThisBuild / scalaVersion := "2.13.18" // the Scala that pyspark 4.3.0 bundles

val sparkJars = settingKey[File]("folder with the Spark 4.3.0 jars (pyspark/jars)")

// Spark is "provided": on the compile and test classpaths, never packaged.
lazy val sparkProvided = Seq(
  sparkJars := file(sys.env.getOrElse("SPARK_JARS", "SPARK_JARS-is-not-set")),
  Compile / unmanagedJars ++= (sparkJars.value ** "*.jar").classpath,
  // an unused import fails the build: the lint step for imports (scalafmt only formats)
  scalacOptions ++= Seq(
    "-deprecation",
    "-feature",
    "-unchecked",
    "-release",
    "17",
    "-Wunused:imports",
    "-Wconf:cat=unused-imports:e"),
  // `make docs` builds the Scaladoc with no warning: an ambiguous or broken link fails it
  Compile / doc / scalacOptions += "-Xfatal-warnings"
)

lazy val root = (project in file("jvm"))
  .settings(sparkProvided)
  .settings(
    name := "kstreams-spark",
    libraryDependencies += "org.scalatest" %% "scalatest" % "3.2.19" % Test,
    // the exactly-once Kafka sink's client: the one bundled with Spark's Kafka connector
    // (jvm/kafka/connector-pom.xml), so provided, never packaged
    libraryDependencies += "org.apache.kafka" % "kafka-clients" % "3.9.2" % Provided,
    // The conformance suite runs Kafka Streams itself (TopologyTestDriver, in-memory stores).
    // Its native and logging dependencies are left out: Spark's own (rocksdbjni 9.8.4, slf4j 2,
    // jackson, compression codecs) are on the classpath, and a second RocksDB would clash.
    libraryDependencies ++= Seq("kafka-streams", "kafka-streams-test-utils").map(name =>
      ("org.apache.kafka" % name % "4.3.1" % Test).excludeAll(
        ExclusionRule("org.rocksdb"),
        ExclusionRule("org.slf4j"),
        ExclusionRule("com.fasterxml.jackson.core"),
        ExclusionRule("com.github.luben"),
        ExclusionRule("org.lz4"),
        ExclusionRule("at.yawk.lz4"),
        ExclusionRule("org.xerial.snappy")
      )),
    Compile / packageDoc / publishArtifact := false,
    // each build installs the jar it built: a local rebuild of the same version replaces it
    publishM2Configuration := publishM2Configuration.value.withOverwrite(true),
    // The POM (`make publish-local`) names what the runtime must hold, provided, never bundled:
    // Spark, which is not resolved here (above) and so is added by hand, at the version this jar is
    // built against, and Spark's Kafka connector, the one the Python package ships (4.2.0, the
    // newest on Maven Central; it runs on Spark 4.3). Provided dependencies are not transitive, so
    // an application's build never tries to fetch them through this POM.
    pomPostProcess := { (pom: scala.xml.Node) =>
      import scala.xml.{Elem, Node}
      import scala.xml.transform.{RewriteRule, RuleTransformer}
      val provided =
        Seq("spark-sql_2.13" -> "4.3.0", "spark-sql-kafka-0-10_2.13" -> "4.2.0").map { case (artifact, version) =>
          <dependency><groupId>org.apache.spark</groupId><artifactId>{artifact}</artifactId><version>{
            version
          }</version><scope>provided</scope></dependency>
        }
      new RuleTransformer(new RewriteRule {
        override def transform(node: Node): Seq[Node] = node match {
          case e: Elem if e.label == "dependencies" => e.copy(child = e.child ++ provided)
          case other => other
        }
      }).transform(pom).head
    },
    // cases both processor runtimes run (ProcessorSpec here, tests/test_processor.py in Python)
    Test / unmanagedResourceDirectories += (ThisBuild / baseDirectory).value / "tests" / "cases",
    Test / fork := true,
    Test / parallelExecution := false,
    Test / javaOptions ++= Seq(
      "-Xmx3g",
      // The serial collector: G1's concurrent threads took CPU the other lane of `make test` needs
      // (three suites: 190-192 CPU-seconds against 196-215 with G1; tests/local_spark.py).
      "-XX:+UseSerialGC",
      "-XX:+IgnoreUnrecognizedVMOptions",
      "--add-opens=java.base/java.lang=ALL-UNNAMED",
      "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
      "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
      "--add-opens=java.base/java.io=ALL-UNNAMED",
      "--add-opens=java.base/java.net=ALL-UNNAMED",
      "--add-opens=java.base/java.nio=ALL-UNNAMED",
      "--add-opens=java.base/java.util=ALL-UNNAMED",
      "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
      "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
      "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
      "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
      "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
      "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
      "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
      "-Djdk.reflect.useDirectMethodHandle=false",
      "-Dio.netty.tryReflectionSetAccessible=true"
    ),
    Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD"),
    // `make test` runs the real-time suite on its own first and the others beside pytest (Makefile)
    Test / testOptions += Tests.Filter(suite =>
      !sys.env.getOrElse("KSTREAMS_SKIP_SUITES", "").split(",").contains(suite)),
    // Every ```scala block of the manual (README.md and docs/guide/*.md), as written, becomes a
    // function of `df`, `left` and `right` in a generated test source
    // (kstreams.readme.ReadmeScalaBlocks), which ReadmeSpec runs: an example a Scala user copies
    // that no longer compiles fails the build.
    Test / sourceGenerators += Def.task {
      val base = (ThisBuild / baseDirectory).value
      val pages = (base / "README.md") +: ((base / "docs" / "guide") * "*.md").get.sortBy(_.getName)
      val blocks = pages.flatMap { page =>
        val text = IO.read(page)
        val name = base.toPath.relativize(page.toPath).toString
        "(?s)```scala\n(.*?)```".r.findAllMatchIn(text).map { m =>
          val line = text.substring(0, m.start).count(_ == '\n') + 1
          s"""    ("$name line $line", (df: DataFrame, left: DataFrame, right: DataFrame) => {\n${m.group(1)}    })"""
        }
      }
      val out = (Test / sourceManaged).value / "kstreams" / "readme" / "ReadmeScalaBlocks.scala"
      IO.write(
        out,
        s"""// Generated by build.sbt from the manual's ```scala blocks: edit README.md or docs/guide/, not this file.
           |package kstreams.readme
           |
           |import org.apache.spark.sql.{DataFrame, SparkSession} // (not sql._: its package kstreams hides ours)
           |import org.apache.spark.sql.functions._
           |
           |import kstreams._
           |
           |object ReadmeScalaBlocks {
           |  /** (where the block starts, the block as a function of the DataFrames it names) */
           |  val blocks: Seq[(String, (DataFrame, DataFrame, DataFrame) => Any)] = Seq(
           |${blocks.mkString(",\n")}
           |  )
           |}
           |""".stripMargin
      )
      Seq(out)
    }.taskValue
  )

// Benchmark-only code (benchmarks/bench puts its jar on the driver's classpath): never in the
// jar the Python package ships.
lazy val bench = (project in file("jvm-bench"))
  .dependsOn(root)
  .settings(sparkProvided)
  .settings(name := "kstreams-spark-bench", Compile / packageDoc / publishArtifact := false)
