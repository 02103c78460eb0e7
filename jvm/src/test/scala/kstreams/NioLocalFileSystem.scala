package kstreams

import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermission

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.{LocalFileSystem, Path, RawLocalFileSystem}
import org.apache.hadoop.fs.permission.FsPermission

/** The local file system of the test sessions (`fs.file.impl`, [[TestSpeed]]; the Python tests'
  * `spark` fixture too), only to save time: without Hadoop's native library (pip's PySpark has
  * none) Hadoop sets a new file's permissions by running a `chmod` process, 3-6 ms from a JVM of
  * this size, for every checkpoint, state and output file of every micro-batch. This sets the same
  * nine permission bits through java.nio instead, in the JVM. Files, contents and permissions are
  * the same; the crash and cluster tests keep Hadoop's own, as users run it. */
class NioLocalFileSystem extends LocalFileSystem(new NioRawLocalFileSystem)

/** [[NioLocalFileSystem]]'s raw file system: Hadoop's, but for how it sets permissions. */
class NioRawLocalFileSystem extends RawLocalFileSystem {
  override def setPermission(p: Path, permission: FsPermission): Unit = {
    val bits = permission.toShort
    // PosixFilePermission's order is owner r/w/x, group r/w/x, others r/w/x: bit 8 down to bit 0
    val granted = PosixFilePermission.values().zipWithIndex.collect {
      case (permission, i) if (bits & (1 << (8 - i))) != 0 => permission
    }
    Files.setPosixFilePermissions(pathToFile(p).toPath, granted.toSet.asJava)
  }
}
