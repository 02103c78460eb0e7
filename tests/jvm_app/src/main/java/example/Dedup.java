package example;

import java.sql.Timestamp;
import java.util.Arrays;
import java.util.List;

import kstreams.KStream;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A Java application built with Maven against the published kstreams-spark artifact: the spec's
 * first dedup example (a@t, a@t+8, a@t+11 with a 10 s interval), printed as "key value" lines of
 * the forwarded records in offset order.
 */
public final class Dedup {
  public static void main(String[] args) {
    SparkSession spark = KStream.configure(SparkSession.builder().appName("kstreams java app")).getOrCreate();
    StructType schema = new StructType()
        .add("key", DataTypes.StringType)
        .add("value", DataTypes.StringType)
        .add("timestamp", DataTypes.TimestampType)
        .add("partition", DataTypes.IntegerType)
        .add("offset", DataTypes.LongType);
    long t = Timestamp.valueOf("2026-01-01 00:01:40").getTime();
    List<Row> records = Arrays.asList(
        RowFactory.create("a", "v0", new Timestamp(t), 0, 0L),
        RowFactory.create("a", "v1", new Timestamp(t + 8_000), 0, 1L),
        RowFactory.create("a", "v2", new Timestamp(t + 11_000), 0, 2L));
    Dataset<Row> input = spark.createDataFrame(records, schema);
    Dataset<Row> forwarded = KStream.apply(input).deduplicateByKey("10 seconds").df();
    for (Row row : forwarded.orderBy("offset").collectAsList()) {
      System.out.println(row.getAs("key") + " " + row.getAs("value"));
    }
    spark.stop();
  }
}
