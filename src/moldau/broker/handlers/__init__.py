"""Request handlers, one module per API family; :func:`register_all` wires them to a broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol import apis

if TYPE_CHECKING:
    from ..broker import Broker


def register_all(broker: Broker) -> None:
    from . import (
        acls,
        admin_topics,
        api_versions,
        client_quotas,
        cluster_info,
        config_resources,
        configs,
        consumer_groups,
        controlled_shutdown,
        describe_producers,
        describe_topic_partitions,
        elect_leaders,
        fetch,
        group_admin,
        groups,
        list_offsets,
        metadata,
        offsets,
        produce,
        producer_ids,
        reassignments,
        records,
        replica_log_dirs,
        sasl,
        scram_users,
        telemetry,
        transactions,
        txn_markers,
        txn_offsets,
    )

    broker.register(apis.API_VERSIONS, api_versions.handle)
    broker.register(apis.SASL_HANDSHAKE, sasl.handle_handshake)
    broker.register(apis.SASL_AUTHENTICATE, sasl.handle_authenticate)
    broker.register(apis.DESCRIBE_USER_SCRAM_CREDENTIALS, scram_users.handle_describe)
    broker.register(apis.ALTER_USER_SCRAM_CREDENTIALS, scram_users.handle_alter)
    broker.register(apis.DESCRIBE_CLIENT_QUOTAS, client_quotas.handle_describe)
    broker.register(apis.ALTER_CLIENT_QUOTAS, client_quotas.handle_alter)
    broker.register(apis.METADATA, metadata.handle)
    broker.register(apis.CONTROLLED_SHUTDOWN, controlled_shutdown.handle)
    broker.register(apis.PRODUCE, produce.handle)
    broker.register(apis.FETCH, fetch.handle)
    broker.register(apis.LIST_OFFSETS, list_offsets.handle)
    broker.register(apis.CREATE_TOPICS, admin_topics.handle_create_topics)
    broker.register(apis.DELETE_TOPICS, admin_topics.handle_delete_topics)
    broker.register(apis.CREATE_PARTITIONS, admin_topics.handle_create_partitions)
    broker.register(apis.DESCRIBE_ACLS, acls.handle_describe)
    broker.register(apis.CREATE_ACLS, acls.handle_create)
    broker.register(apis.DELETE_ACLS, acls.handle_delete)
    broker.register(apis.DESCRIBE_CONFIGS, configs.handle_describe_configs)
    broker.register(apis.ALTER_CONFIGS, configs.handle_alter_configs)
    broker.register(apis.INCREMENTAL_ALTER_CONFIGS, configs.handle_incremental_alter_configs)
    broker.register(apis.DELETE_RECORDS, records.handle_delete_records)
    broker.register(apis.OFFSET_FOR_LEADER_EPOCH, records.handle_offset_for_leader_epoch)
    broker.register(apis.ALTER_PARTITION_REASSIGNMENTS, reassignments.handle_alter)
    broker.register(apis.LIST_PARTITION_REASSIGNMENTS, reassignments.handle_list)
    broker.register(apis.DESCRIBE_LOG_DIRS, cluster_info.handle_describe_log_dirs)
    broker.register(apis.ALTER_REPLICA_LOG_DIRS, replica_log_dirs.handle)
    broker.register(apis.DESCRIBE_CLUSTER, cluster_info.handle_describe_cluster)
    broker.register(apis.ELECT_LEADERS, elect_leaders.handle_elect_leaders)
    broker.register(apis.INIT_PRODUCER_ID, producer_ids.handle)
    broker.register(apis.WRITE_TXN_MARKERS, txn_markers.handle)
    broker.register(apis.FIND_COORDINATOR, groups.handle_find_coordinator)
    broker.register(apis.ADD_PARTITIONS_TO_TXN, transactions.handle_add_partitions)
    broker.register(apis.ADD_OFFSETS_TO_TXN, transactions.handle_add_offsets)
    broker.register(apis.END_TXN, transactions.handle_end_txn)
    broker.register(apis.DESCRIBE_TRANSACTIONS, transactions.handle_describe)
    broker.register(apis.LIST_TRANSACTIONS, transactions.handle_list)
    broker.register(apis.JOIN_GROUP, groups.handle_join_group)
    broker.register(apis.SYNC_GROUP, groups.handle_sync_group)
    broker.register(apis.HEARTBEAT, groups.handle_heartbeat)
    broker.register(apis.LEAVE_GROUP, groups.handle_leave_group)
    broker.register(apis.LIST_GROUPS, group_admin.handle_list_groups)
    broker.register(apis.DESCRIBE_GROUPS, group_admin.handle_describe_groups)
    broker.register(apis.DELETE_GROUPS, group_admin.handle_delete_groups)
    broker.register(apis.OFFSET_COMMIT, offsets.handle_offset_commit)
    broker.register(apis.OFFSET_FETCH, offsets.handle_offset_fetch)
    broker.register(apis.OFFSET_DELETE, offsets.handle_offset_delete)
    broker.register(apis.TXN_OFFSET_COMMIT, txn_offsets.handle_txn_offset_commit)
    broker.register(apis.CONSUMER_GROUP_HEARTBEAT,
                    consumer_groups.handle_consumer_group_heartbeat)
    broker.register(apis.CONSUMER_GROUP_DESCRIBE, consumer_groups.handle_consumer_group_describe)
    broker.register(apis.GET_TELEMETRY_SUBSCRIPTIONS, telemetry.handle_get_subscriptions)
    broker.register(apis.PUSH_TELEMETRY, telemetry.handle_push)
    broker.register(apis.LIST_CONFIG_RESOURCES, config_resources.handle)
    broker.register(apis.DESCRIBE_TOPIC_PARTITIONS, describe_topic_partitions.handle)
    broker.register(apis.DESCRIBE_PRODUCERS, describe_producers.handle)
