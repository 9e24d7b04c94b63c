//! Responses fitted to the version they are sent at. A Kafka message gains and loses fields
//! from version to version, and the generated encoder refuses to write a message that sets a
//! field its version does not carry (`field leader_epoch is not available on version 2`),
//! which would close the client's connection. Handlers therefore build one response with
//! every field they know, and `Request::respond` fits it to the negotiated version first: a
//! field the version lacks goes back to its default, which is what a client at that version
//! would read anyway (Kafka marks such response fields "ignorable" and its serializers drop
//! them the same way).
//!
//! The table below lists, per response type, the fields that exist on only part of the
//! type's versions (the ranges of Kafka's message schemas, as the generated codec documents
//! each field) and the nested structures that hold such fields. Every response type the
//! broker sends must implement `Fit` (the bound on `respond` makes a missing row a compile
//! error); `tests/wire/versions.rs` encodes and decodes a real response at every advertised
//! version of every API. Structures with no version-dependent fields anywhere below them
//! have an empty row.
//!
//! Fields that change shape between versions rather than disappear (FindCoordinator's
//! single coordinator before v4 and `coordinators` after, OffsetFetch's `topics` before v8
//! and `groups` after) are both listed: a handler may fill both forms and each version keeps
//! its own.

use proto_kafka::messages::*;

/// A response made valid for one version (see the module docs).
pub trait Fit {
    fn fit(&mut self, version: i16);
}

impl<T: Fit> Fit for Vec<T> {
    fn fit(&mut self, version: i16) {
        for item in self {
            item.fit(version);
        }
    }
}

impl<T: Fit> Fit for Option<T> {
    fn fit(&mut self, version: i16) {
        if let Some(item) = self {
            item.fit(version);
        }
    }
}

/// `Type { field: FIRST..=LAST, ... } each { nested, ... };` resets each listed field outside
/// its versions to the type's default, then fits the nested structures.
macro_rules! fit {
    ($($ty:ty { $($field:ident: $lo:literal..=$hi:literal),* } $(each { $($nested:ident),* })?;)*) => {
        $(impl Fit for $ty {
            #[allow(unused_variables)]
            fn fit(&mut self, version: i16) {
                $(if !($lo..=$hi).contains(&version) {
                    self.$field = <$ty>::default().$field;
                })*
                $($(self.$nested.fit(version);)*)?
            }
        })*
    };
}

fit! {
    produce_response::BatchIndexAndErrorMessage { batch_index: 8..=13, batch_index_error_message: 8..=13 };
    produce_response::LeaderIdAndEpoch { leader_id: 10..=13, leader_epoch: 10..=13 };
    produce_response::NodeEndpoint { node_id: 10..=13, host: 10..=13, port: 10..=13, rack: 10..=13 };
    produce_response::PartitionProduceResponse { log_start_offset: 5..=13, record_errors: 8..=13, error_message: 8..=13, current_leader: 10..=13 } each { record_errors, current_leader };
    produce_response::ProduceResponse { node_endpoints: 10..=13 } each { responses, node_endpoints };
    produce_response::TopicProduceResponse { name: 3..=12, topic_id: 13..=13 } each { partition_responses };

    list_offsets_response::ListOffsetsPartitionResponse { leader_epoch: 4..=10 };
    list_offsets_response::ListOffsetsResponse { throttle_time_ms: 2..=10 } each { topics };
    list_offsets_response::ListOffsetsTopicResponse {} each { partitions };

    metadata_response::MetadataResponse { throttle_time_ms: 3..=13, cluster_id: 2..=13, controller_id: 1..=13, cluster_authorized_operations: 8..=10, error_code: 13..=13 } each { brokers, topics };
    metadata_response::MetadataResponseBroker { rack: 1..=13 };
    metadata_response::MetadataResponsePartition { leader_epoch: 7..=13, offline_replicas: 5..=13 };
    metadata_response::MetadataResponseTopic { topic_id: 10..=13, is_internal: 1..=13, topic_authorized_operations: 8..=13 } each { partitions };

    offset_for_leader_epoch_response::OffsetForLeaderEpochResponse {};

    api_versions_response::ApiVersionsResponse { throttle_time_ms: 1..=4, supported_features: 3..=4, finalized_features_epoch: 3..=4, finalized_features: 3..=4, zk_migration_ready: 3..=4 } each { supported_features, finalized_features };
    api_versions_response::FinalizedFeatureKey { name: 3..=4, max_version_level: 3..=4, min_version_level: 3..=4 };
    api_versions_response::SupportedFeatureKey { name: 3..=4, min_version: 3..=4, max_version: 3..=4 };

    create_topics_response::CreatableTopicConfigs { name: 5..=7, value: 5..=7, read_only: 5..=7, config_source: 5..=7, is_sensitive: 5..=7 };
    create_topics_response::CreatableTopicResult { topic_id: 7..=7, topic_config_error_code: 5..=7, num_partitions: 5..=7, replication_factor: 5..=7, configs: 5..=7 } each { configs };
    create_topics_response::CreateTopicsResponse {} each { topics };

    delete_topics_response::DeletableTopicResult { topic_id: 6..=6, error_message: 5..=6 };
    delete_topics_response::DeleteTopicsResponse {} each { responses };

    describe_configs_response::DescribeConfigsResourceResult { config_type: 3..=4, documentation: 3..=4 };
    describe_configs_response::DescribeConfigsResponse {} each { results };
    describe_configs_response::DescribeConfigsResult {} each { configs };

    incremental_alter_configs_response::IncrementalAlterConfigsResponse {};

    describe_cluster_response::DescribeClusterBroker { is_fenced: 2..=2 };
    describe_cluster_response::DescribeClusterResponse { endpoint_type: 1..=2 } each { brokers };

    find_coordinator_response::Coordinator { key: 4..=6, node_id: 4..=6, host: 4..=6, port: 4..=6, error_code: 4..=6, error_message: 4..=6 };
    find_coordinator_response::FindCoordinatorResponse { throttle_time_ms: 1..=6, error_code: 0..=3, error_message: 1..=3, node_id: 0..=3, host: 0..=3, port: 0..=3, coordinators: 4..=6 } each { coordinators };

    join_group_response::JoinGroupResponse { throttle_time_ms: 2..=9, protocol_type: 7..=9, skip_assignment: 9..=9 } each { members };
    join_group_response::JoinGroupResponseMember { group_instance_id: 5..=9 };

    sync_group_response::SyncGroupResponse { throttle_time_ms: 1..=5, protocol_type: 5..=5, protocol_name: 5..=5 };

    heartbeat_response::HeartbeatResponse { throttle_time_ms: 1..=4 };

    leave_group_response::LeaveGroupResponse { throttle_time_ms: 1..=5, members: 3..=5 } each { members };
    leave_group_response::MemberResponse { member_id: 3..=5, group_instance_id: 3..=5, error_code: 3..=5 };

    offset_commit_response::OffsetCommitResponse { throttle_time_ms: 3..=10 } each { topics };
    offset_commit_response::OffsetCommitResponseTopic { name: 2..=9, topic_id: 10..=10 };

    offset_fetch_response::OffsetFetchResponse { throttle_time_ms: 3..=10, topics: 1..=7, error_code: 2..=7, groups: 8..=10 } each { topics, groups };
    offset_fetch_response::OffsetFetchResponseGroup { group_id: 8..=10, topics: 8..=10, error_code: 8..=10 } each { topics };
    offset_fetch_response::OffsetFetchResponsePartition { partition_index: 1..=7, committed_offset: 1..=7, committed_leader_epoch: 5..=7, metadata: 1..=7, error_code: 1..=7 };
    offset_fetch_response::OffsetFetchResponsePartitions { partition_index: 8..=10, committed_offset: 8..=10, committed_leader_epoch: 8..=10, metadata: 8..=10, error_code: 8..=10 };
    offset_fetch_response::OffsetFetchResponseTopic { name: 1..=7, partitions: 1..=7 } each { partitions };
    offset_fetch_response::OffsetFetchResponseTopics { name: 8..=9, topic_id: 10..=10, partitions: 8..=10 } each { partitions };

    list_groups_response::ListGroupsResponse { throttle_time_ms: 1..=5 } each { groups };
    list_groups_response::ListedGroup { group_state: 4..=5, group_type: 5..=5 };

    describe_groups_response::DescribeGroupsResponse { throttle_time_ms: 1..=6 } each { groups };
    describe_groups_response::DescribedGroup { error_message: 6..=6, authorized_operations: 3..=6 } each { members };
    describe_groups_response::DescribedGroupMember { group_instance_id: 4..=6 };

    delete_groups_response::DeleteGroupsResponse {};

    offset_delete_response::OffsetDeleteResponse {};

    init_producer_id_response::InitProducerIdResponse { ongoing_txn_producer_id: 6..=6, ongoing_txn_producer_epoch: 6..=6 };

    sasl_handshake_response::SaslHandshakeResponse {};

    sasl_authenticate_response::SaslAuthenticateResponse { session_lifetime_ms: 1..=2 };

    create_acls_response::CreateAclsResponse {};

    describe_acls_response::DescribeAclsResponse {};

    delete_acls_response::DeleteAclsResponse {};

    describe_user_scram_credentials_response::DescribeUserScramCredentialsResponse {};

    alter_user_scram_credentials_response::AlterUserScramCredentialsResponse {};

    create_partitions_response::CreatePartitionsResponse {};
    alter_partition_reassignments_response::AlterPartitionReassignmentsResponse {
        allow_replication_factor_change: 1..=1
    };
    list_partition_reassignments_response::ListPartitionReassignmentsResponse {};
    elect_leaders_response::ElectLeadersResponse { error_code: 1..=2 };

    delete_records_response::DeleteRecordsResponse {};

    describe_log_dirs_response::DescribeLogDirsResponse { error_code: 3..=4 } each { results };
    describe_log_dirs_response::DescribeLogDirsResult { total_bytes: 4..=4, usable_bytes: 4..=4 };

    alter_configs_response::AlterConfigsResponse {};

    describe_client_quotas_response::DescribeClientQuotasResponse {};

    alter_client_quotas_response::AlterClientQuotasResponse {};

    describe_producers_response::DescribeProducersResponse {};
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto_kafka::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
    use proto_kafka::protocol::Encodable;

    #[test]
    fn a_field_the_version_lacks_is_dropped_and_the_rest_kept() {
        let mut p = ListOffsetsPartitionResponse::default();
        p.offset = 42;
        p.leader_epoch = 3;
        let mut t = ListOffsetsTopicResponse::default();
        t.partitions.push(p);
        let mut r = ListOffsetsResponse::default();
        r.throttle_time_ms = 5;
        r.topics.push(t);
        assert!(r.compute_size(2).is_err(), "the codec refuses leader_epoch at v2");

        let mut at_v1 = r.clone();
        at_v1.fit(1);
        assert_eq!(at_v1.throttle_time_ms, 0, "v1 has no throttle time");
        assert_eq!(at_v1.topics[0].partitions[0].leader_epoch, -1, "back to the default");
        assert_eq!(at_v1.topics[0].partitions[0].offset, 42);
        assert!(at_v1.compute_size(1).is_ok());

        let mut at_v4 = r.clone();
        at_v4.fit(4);
        assert_eq!(at_v4, r, "v4 carries every field");
    }

    #[test]
    fn both_shapes_of_a_reshaped_response_fit_their_versions() {
        let mut c = find_coordinator_response::Coordinator::default();
        c.node_id = BrokerId(7);
        let mut r = FindCoordinatorResponse::default();
        r.node_id = BrokerId(7);
        r.host = proto_kafka::protocol::StrBytes::from_static_str("h");
        r.coordinators.push(c);
        let mut old = r.clone();
        old.fit(3);
        assert!(old.coordinators.is_empty() && old.node_id == BrokerId(7));
        assert!(old.compute_size(3).is_ok());
        let mut new = r.clone();
        new.fit(4);
        assert_eq!(new.node_id, BrokerId(0));
        assert_eq!(new.coordinators.len(), 1);
        assert!(new.compute_size(4).is_ok());
    }
}
