"""The API versions moldau implements and advertises in ApiVersions.

Only fully implemented versions are listed. Ranges follow what an Apache Kafka 4.2 broker
advertises, limited to what kio can encode and to what moldau implements (docs/protocol.md
has the table). Clients infer the broker's release from these maxima (kafka-python reads
ListOffsets v11 as 4.2), so a bump here is a promise to serve that version's semantics.
DescribeQuorum (55) is never advertised: it has no meaning without KRaft.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiRange:
    key: int
    name: str
    min_version: int
    max_version: int

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
CONTROLLED_SHUTDOWN = 7
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
OFFSET_DELETE = 47
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
DESCRIBE_CLUSTER = 60
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
GET_TELEMETRY_SUBSCRIPTIONS = 71
PUSH_TELEMETRY = 72
LIST_CONFIG_RESOURCES = 74
DESCRIBE_TOPIC_PARTITIONS = 75

SUPPORTED: dict[int, ApiRange] = {
    r.key: r
    for r in (
        ApiRange(PRODUCE, "Produce", 3, 13),
        ApiRange(FETCH, "Fetch", 4, 18),
        ApiRange(LIST_OFFSETS, "ListOffsets", 1, 11),
        ApiRange(METADATA, "Metadata", 0, 13),
        # v0 has a request header without client id: not offered (see protocol.schemas).
        ApiRange(CONTROLLED_SHUTDOWN, "ControlledShutdown", 1, 3),
        # v10 of both name topics by id.
        ApiRange(OFFSET_COMMIT, "OffsetCommit", 2, 10),
        ApiRange(OFFSET_FETCH, "OffsetFetch", 1, 10),
        ApiRange(FIND_COORDINATOR, "FindCoordinator", 0, 6),
        ApiRange(JOIN_GROUP, "JoinGroup", 0, 9),
        ApiRange(HEARTBEAT, "Heartbeat", 0, 4),
        ApiRange(LEAVE_GROUP, "LeaveGroup", 0, 5),
        ApiRange(SYNC_GROUP, "SyncGroup", 0, 5),
        ApiRange(DESCRIBE_GROUPS, "DescribeGroups", 0, 6),
        ApiRange(LIST_GROUPS, "ListGroups", 0, 5),
        # v0: raw SASL tokens follow; v1: tokens in SaslAuthenticate requests.
        ApiRange(SASL_HANDSHAKE, "SaslHandshake", 0, 1),
        ApiRange(API_VERSIONS, "ApiVersions", 0, 4),
        ApiRange(CREATE_TOPICS, "CreateTopics", 2, 7),
        ApiRange(DELETE_TOPICS, "DeleteTopics", 1, 6),
        ApiRange(DELETE_RECORDS, "DeleteRecords", 0, 2),
        ApiRange(INIT_PRODUCER_ID, "InitProducerId", 0, 5),
        ApiRange(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4),
        # v4+ batch transactions (brokers verifying a produce, KIP-890).
        ApiRange(ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 5),
        ApiRange(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4),
        # v5: transactions version 2 (the epoch is bumped at every commit and abort).
        ApiRange(END_TXN, "EndTxn", 0, 5),
        # v0 is gone from Kafka 4 (KIP-896); v1 is the first flexible version.
        ApiRange(WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 2),
        # v3+ (KIP-447) carries the consumer's generation; v5 = v4 (KIP-890).
        ApiRange(TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 5),
        # v0 is gone from Kafka 4 (KIP-896); served with an authorizer (SECURITY_DISABLED else).
        ApiRange(DESCRIBE_ACLS, "DescribeAcls", 1, 3),
        ApiRange(CREATE_ACLS, "CreateAcls", 1, 3),
        ApiRange(DELETE_ACLS, "DeleteAcls", 1, 3),
        ApiRange(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4),
        ApiRange(ALTER_CONFIGS, "AlterConfigs", 0, 2),
        # v0 was removed in Kafka 4.0 (KIP-896), as for DescribeLogDirs.
        ApiRange(ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", 1, 2),
        ApiRange(DESCRIBE_LOG_DIRS, "DescribeLogDirs", 1, 4),
        # v1 carries the session lifetime (KIP-368).
        ApiRange(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
        ApiRange(CREATE_PARTITIONS, "CreatePartitions", 0, 3),
        ApiRange(DELETE_GROUPS, "DeleteGroups", 0, 2),
        ApiRange(ELECT_LEADERS, "ElectLeaders", 0, 2),
        ApiRange(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1),
        ApiRange(ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1),
        ApiRange(LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0),
        ApiRange(OFFSET_DELETE, "OffsetDelete", 0, 0),
        ApiRange(DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0, 1),
        ApiRange(ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 1),
        ApiRange(DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0),
        ApiRange(ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0),
        ApiRange(DESCRIBE_CLUSTER, "DescribeCluster", 0, 2),
        ApiRange(DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0),
        ApiRange(DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0),
        ApiRange(LIST_TRANSACTIONS, "ListTransactions", 0, 2),
        # KIP-848; v1 regex subscriptions are refused (INVALID_REQUEST).
        ApiRange(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1),
        ApiRange(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1),
        # KIP-714; Kafka offers these only with a telemetry receiver plugin, moldau always.
        ApiRange(GET_TELEMETRY_SUBSCRIPTIONS, "GetTelemetrySubscriptions", 0, 0),
        ApiRange(PUSH_TELEMETRY, "PushTelemetry", 0, 0),
        ApiRange(LIST_CONFIG_RESOURCES, "ListConfigResources", 0, 1),
        ApiRange(DESCRIBE_TOPIC_PARTITIONS, "DescribeTopicPartitions", 0, 0),
    )
}
