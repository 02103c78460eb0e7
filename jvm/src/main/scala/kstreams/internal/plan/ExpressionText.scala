package kstreams
package internal
package plan

import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
import org.apache.spark.sql.catalyst.parser.{CatalystSqlParser, ParseException}

/** What can be said about the text of a Spark SQL expression before any SparkSession exists (the
  * CLI's `--id`, checked in a JVM of its own before Spark starts): whether it parses, and whether
  * the columns it names are among `columns`. Functions and types are left to Spark's analyzer: its
  * function registry alone takes longer to load than the whole check may. */
private[kstreams] object ExpressionText {

  /** Why `text` cannot be an expression over `columns` (case-insensitive, as Spark resolves them
    * by default), or None when it may be. (The parser reads every name inside a lambda's body as
    * one of its variables, so those names are left to the analyzer.) */
  def problem(text: String, columns: Seq[String]): Option[String] = {
    val parsed =
      try CatalystSqlParser.parseExpression(text)
      catch {
        // Spark's first line says what and where: "[PARSE_SYNTAX_ERROR] Syntax error at or near
        // end of input. SQLSTATE: 42601 (line 1, pos 29)"
        case e: ParseException =>
          val line = e.getMessage.linesIterator.map(_.trim).find(_.nonEmpty).getOrElse(e.getCondition)
          return Some(s"does not parse: ${line.replaceAll("""\s*SQLSTATE: \w+""", "")}")
      }
    val known = columns.map(_.toLowerCase).toSet
    parsed
      .collect { case a: UnresolvedAttribute => a.nameParts.head }
      .find(name => !known(name.toLowerCase))
      .map(name => s"no column '$name' (the columns are ${columns.mkString(", ")})")
  }

  /** The CLI's check in a JVM started for it alone, on Spark's jars without Spark (about 1.5 s,
    * where a Spark driver takes 2 s before it runs anything and the session 30 s): arguments are
    * the text, then the columns; prints the problem and exits 1, or exits 0. */
  def main(args: Array[String]): Unit = problem(args.head, args.toSeq.tail) match {
    case Some(why) => println(why); sys.exit(1)
    case None => sys.exit(0)
  }
}
