package kstreams.internal.connect

import java.lang.reflect.{InvocationTargetException, Method, Modifier}

import org.apache.spark.sql.{Column, DataFrame}
import org.sparkproject.connect.protobuf.CodedInputStream

import kstreams.KStreamsException

/** A call of the public kstreams API as a Spark Connect client sends it (`proto/kstreams_connect.proto`,
  * message `Call`): `method` on `target`'s result, or, without a target, the static method of
  * `kstreams.<className>` (`PythonAPI`, the window factories). */
final case class Call(target: Option[Call], className: String, method: String, args: Seq[Arg])

/** An argument of a [[Call]] (message `Value`). DataFrames and Columns stay serialized Connect
  * messages until the planner rebuilds them. */
sealed trait Arg

object Arg {
  case object Null extends Arg
  final case class Str(value: String) extends Arg
  final case class Long(value: scala.Long) extends Arg
  final case class Bool(value: Boolean) extends Arg
  final case class Dbl(value: Double) extends Arg
  final case class Relation(bytes: Array[Byte]) extends Arg
  final case class Expression(bytes: Array[Byte]) extends Arg
  final case class Result(call: Call) extends Arg
  final case class Columns(expressions: Seq[Array[Byte]]) extends Arg
}

/** Reads [[Call]]s with protobuf's wire reader, by the field numbers of `proto/kstreams_connect.proto`
  * (the server needs no generated classes: it reads these few fields itself). */
object CallDecoder {

  def call(bytes: Array[Byte]): Call = {
    val in = CodedInputStream.newInstance(bytes)
    var target: Option[Call] = None
    var className, method = ""
    val args = Vector.newBuilder[Arg]
    fields(in) {
      case 1 => target = Some(call(in.readByteArray()))
      case 2 => className = in.readString()
      case 3 => method = in.readString()
      case 4 => args += value(in.readByteArray())
    }
    Call(target, className, method, args.result())
  }

  private def value(bytes: Array[Byte]): Arg = {
    val in = CodedInputStream.newInstance(bytes)
    var result: Arg = Arg.Null
    fields(in) {
      case 1 => in.readBool(); result = Arg.Null
      case 2 => result = Arg.Str(in.readString())
      case 3 => result = Arg.Long(in.readInt64())
      case 4 => result = Arg.Bool(in.readBool())
      case 5 => result = Arg.Dbl(in.readDouble())
      case 6 => result = Arg.Relation(in.readByteArray())
      case 7 => result = Arg.Expression(in.readByteArray())
      case 8 => result = Arg.Result(call(in.readByteArray()))
      case 9 =>
        val list = CodedInputStream.newInstance(in.readByteArray())
        val expressions = Vector.newBuilder[Array[Byte]]
        fields(list) { case 1 => expressions += list.readByteArray() }
        result = Arg.Columns(expressions.result())
    }
    result
  }

  /** Reads the fields of one message, giving each known field number to `read` and skipping the
    * rest (a newer client's fields). */
  private def fields(in: CodedInputStream)(read: PartialFunction[Int, Unit]): Unit = {
    var tag = in.readTag()
    while (tag != 0) {
      val number = tag >>> 3
      if (read.isDefinedAt(number)) read(number) else in.skipField(tag)
      tag = in.readTag()
    }
  }
}

/** Makes the [[Call]]s of a Connect client on the server: the same methods the classic Python
  * path calls through py4j, so an operator cannot behave differently over Connect.
  *
  * Only public methods declared by classes of the `kstreams` package are called (plus `get` on the
  * map `PythonAPI.branches` returns): a client can use the library, not reach the rest of the JVM
  * through it. */
final class CallRunner(relation: Array[Byte] => DataFrame, expression: Array[Byte] => Column) {

  def run(call: Call): AnyRef = {
    val args = call.args.map(argument)
    call.target match {
      case None =>
        if (!call.className.matches("[A-Z][A-Za-z0-9]*")) refuse(s"there is no kstreams class ${call.className}")
        val cls =
          try Class.forName("kstreams." + call.className)
          catch { case _: ClassNotFoundException => refuse(s"there is no kstreams class ${call.className}") }
        invoke(cls, null, call.method, args, static = true)
      case Some(target) =>
        val receiver = run(target)
        receiver match {
          case map: java.util.Map[_, _] if call.method == "get" && args.size == 1 =>
            Option(map.get(args.head).asInstanceOf[AnyRef])
              .getOrElse(refuse(s"no entry ${args.head} in ${map.keySet}"))
          case _ => invoke(receiver.getClass, receiver, call.method, args, static = false)
        }
    }
  }

  private def argument(arg: Arg): AnyRef = arg match {
    case Arg.Null => null
    case Arg.Str(v) => v
    case Arg.Long(v) => java.lang.Long.valueOf(v)
    case Arg.Bool(v) => java.lang.Boolean.valueOf(v)
    case Arg.Dbl(v) => java.lang.Double.valueOf(v)
    case Arg.Relation(bytes) => relation(bytes)
    case Arg.Expression(bytes) => expression(bytes)
    case Arg.Result(call) => run(call)
    case Arg.Columns(expressions) => expressions.map(expression).toArray
  }

  private def invoke(cls: Class[_], receiver: AnyRef, name: String, args: Seq[AnyRef], static: Boolean): AnyRef = {
    val candidates = cls.getMethods.toSeq.filter { m =>
      m.getName == name && m.getParameterCount == args.size && Modifier.isStatic(m.getModifiers) == static &&
      m.getDeclaringClass.getName.startsWith("kstreams.") && !m.getDeclaringClass.getName.startsWith(
        "kstreams.internal.")
    }
    // every overload the arguments fit (a bridge method repeats one): the JVM lists methods in no
    // defined order, so more than one is refused rather than one picked by chance
    val fitting = candidates
      .filterNot(_.isBridge)
      .flatMap(m => converted(m, args).map(m -> _))
      .distinctBy(_._1.getParameterTypes.toSeq)
    val chosen = fitting match {
      case Seq(one) => one
      case Seq() =>
        refuse(s"kstreams ${cls.getSimpleName} has no method $name taking ${args.map(describe).mkString(", ")}")
      case several =>
        refuse(
          s"kstreams ${cls.getSimpleName}.$name taking ${args.map(describe).mkString(", ")} could be any of " +
            several.map(_._1.getParameterTypes.map(_.getSimpleName).mkString("(", ", ", ")")).mkString(", "))
    }
    try chosen._1.invoke(receiver, chosen._2: _*)
    catch { case e: InvocationTargetException => throw e.getCause }
  }

  /** `args` as `method`'s parameters, or None when they do not fit. */
  private def converted(method: Method, args: Seq[AnyRef]): Option[Seq[AnyRef]] = {
    val values = method.getParameterTypes.toSeq.zip(args).map {
      case (t, null) => if (t.isPrimitive) None else Some(null)
      case (t, v: java.lang.Long) if t == classOf[Int] || t == classOf[java.lang.Integer] =>
        if (v.longValue.isValidInt) Some(Int.box(v.intValue)) else None
      case (t, v: java.lang.Long) if t == classOf[scala.Long] => Some(v)
      case (t, v: java.lang.Boolean) if t == classOf[Boolean] => Some(v)
      case (t, v: java.lang.Double) if t == classOf[Double] => Some(v)
      case (t, v) if t.isInstance(v) => Some(v)
      case _ => None
    }
    if (values.forall(_.isDefined)) Some(values.map(_.get)) else None
  }

  private def describe(v: AnyRef): String = if (v == null) "null" else v.getClass.getSimpleName

  private def refuse(message: String): Nothing =
    throw new KStreamsException(s"a Spark Connect client asked for something this server cannot do: $message")
}

/** The value of a call that does not return a DataFrame, as JSON text (strings, arrays of strings). */
object CallResults {
  def json(value: Any): String = value match {
    case null => "null"
    case s: String => "\"" + s.flatMap(escaped) + "\""
    case a: Array[_] => a.map(json).mkString("[", ",", "]")
    case b: java.lang.Boolean => b.toString
    case n: java.lang.Number => n.toString
    case other =>
      throw new KStreamsException(s"a ${other.getClass.getSimpleName} cannot be sent to a Spark Connect client")
  }

  private def escaped(c: Char): String = c match {
    case '"' => "\\\""
    case '\\' => "\\\\"
    case c if c < ' ' => f"\\u${c.toInt}%04x"
    case c => c.toString
  }
}
