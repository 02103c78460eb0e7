package kstreams
package internal
package join

private[kstreams] sealed trait JoinKind
private[kstreams] object JoinKind {
  case object Inner extends JoinKind
  case object Left extends JoinKind
  case object Outer extends JoinKind
}
