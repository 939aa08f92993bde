"""The ``moldau`` PySpark data source: Spark's Kafka source and sink, in Python.

Spark's own Kafka connector is a JVM jar; this is a Python data source (``pyspark.sql.
datasource``) with the same schema and option names, talking to any Kafka-compatible broker
through confluent-kafka. The name cannot be ``kafka`` (taken by the built-in source), so
queries say ``format("moldau")``. Options are validated when the query is defined.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .exactly_once import (
    MoldauExactlyOnceBatchWriter,
    MoldauExactlyOnceStreamWriter,
    ensure_commits_topic,
)
from .options import OptionError, parse_bool, parse_sink_options, parse_source_options
from .readers import MoldauBatchReader, MoldauStreamReader
from .schema import check_sink_schema, source_schema
from .writers import MoldauBatchWriter, MoldauStreamWriter


class MoldauDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("moldau")``."""

    @classmethod
    def name(cls) -> str:
        return "moldau"

    def schema(self) -> StructType:
        return source_schema(parse_bool(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return MoldauBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MoldauStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options.topic)
        if options.exactly_once is not None:
            if options.exactly_once.batch_id is None:
                raise OptionError("option 'exactlyOnce' applies to streaming writes "
                                  "(writeStream), or to a write in foreachBatch that names "
                                  "its stream and batch ('queryId', 'batchId')")
            ensure_commits_topic(options)
            return MoldauExactlyOnceBatchWriter(options)
        return MoldauBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options.topic)
        if options.exactly_once is not None:
            ensure_commits_topic(options)  # on the driver, before any task writes to it
            if options.exactly_once.batch_id is not None:
                raise OptionError("options 'queryId' and 'batchId' are for a write in "
                                  "foreachBatch; a streaming write takes both from Spark")
            return MoldauExactlyOnceStreamWriter(options)
        return MoldauStreamWriter(options)
