"""The row layout of the source (Spark's Kafka schema) and the checks on the sink's input."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def source_schema(include_headers: bool) -> StructType:
    """Exactly the columns (names, types, order) of Spark's Kafka source."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class SinkSchemaError(ValueError):
    """The DataFrame to write lacks ``value`` or has a column of a type Kafka cannot take."""


def _is_text_or_binary(data_type: DataType) -> bool:
    return isinstance(data_type, StringType | BinaryType)


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's Kafka sink rules: value required; key/value text or binary; topic known."""
    columns = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in columns:
        raise SinkSchemaError("required attribute 'value' not found")
    for name in ("key", "value"):
        if name in columns and not _is_text_or_binary(columns[name]):
            raise SinkSchemaError(f"{name} attribute type must be a string or binary")
    if "topic" in columns and not isinstance(columns["topic"], StringType):
        raise SinkSchemaError("topic attribute type must be a string")
    if "topic" not in columns and topic_option is None:
        raise SinkSchemaError(
            "topic option required when no 'topic' attribute is present; use the topic "
            "option to set a topic"
        )
    if "partition" in columns and not isinstance(columns["partition"], IntegerType):
        raise SinkSchemaError("partition attribute type must be an int")
    if "headers" in columns:
        headers = columns["headers"]
        ok = (isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
              and [f.name for f in headers.elementType.fields] == ["key", "value"]
              and isinstance(headers.elementType.fields[0].dataType, StringType)
              and _is_text_or_binary(headers.elementType.fields[1].dataType))
        if not ok:
            raise SinkSchemaError(
                "headers attribute type must be array<struct<key:string,value:binary>>"
            )
