//! The throttle time a response carries (`throttle_time_ms`, KIP-219): how long the broker
//! will not read the client's next request, which the client then waits out itself. A
//! handler sets what its byte quota decided; `Request::respond` raises it to what the
//! request quota decided once the handler is done, which is known only then. The field
//! exists on part of some responses' versions and on none of SASL's: the table gives, per
//! response type, the versions whose schema has it (Kafka's message schemas, as the generated
//! codec documents each field), and setting it elsewhere does nothing, since the encoder
//! refuses a field its version lacks.

use std::time::Duration;

use proto_kafka::messages::*;

/// A throttle as the field carries it: whole milliseconds, at most `i32::MAX`.
pub fn millis(throttle: Duration) -> i32 {
    throttle.as_millis().min(i32::MAX as u128) as i32
}

/// A response whose throttle time can be raised (see the module docs).
pub trait Throttle {
    /// Raises the throttle time to `ms` if `version` carries the field.
    fn throttle(&mut self, ms: i32, version: i16);
}

/// `Type: FIRST..=LAST` for each response whose versions FIRST to LAST carry
/// `throttle_time_ms`; `Type: none` for one that never does.
macro_rules! throttle {
    ($($ty:ty: $($lo:literal..=$hi:literal)? $(none)?;)*) => {
        $(impl Throttle for $ty {
            #[allow(unused_variables)]
            fn throttle(&mut self, ms: i32, version: i16) {
                $(if ($lo..=$hi).contains(&version) {
                    self.throttle_time_ms = self.throttle_time_ms.max(ms);
                })?
            }
        })*
    };
}

throttle! {
    AlterClientQuotasResponse: 0..=1;
    AlterConfigsResponse: 0..=2;
    AlterPartitionReassignmentsResponse: 0..=1;
    AlterUserScramCredentialsResponse: 0..=0;
    ApiVersionsResponse: 1..=4;
    CreateAclsResponse: 1..=3;
    CreatePartitionsResponse: 0..=3;
    CreateTopicsResponse: 2..=7;
    DeleteAclsResponse: 1..=3;
    DeleteGroupsResponse: 0..=2;
    DeleteRecordsResponse: 0..=2;
    DeleteTopicsResponse: 1..=6;
    DescribeAclsResponse: 1..=3;
    DescribeClientQuotasResponse: 0..=1;
    DescribeClusterResponse: 0..=2;
    DescribeConfigsResponse: 1..=4;
    DescribeGroupsResponse: 1..=6;
    DescribeLogDirsResponse: 1..=4;
    DescribeProducersResponse: 0..=0;
    DescribeUserScramCredentialsResponse: 0..=0;
    ElectLeadersResponse: 0..=2;
    FindCoordinatorResponse: 1..=6;
    HeartbeatResponse: 1..=4;
    IncrementalAlterConfigsResponse: 0..=1;
    InitProducerIdResponse: 0..=6;
    JoinGroupResponse: 2..=9;
    LeaveGroupResponse: 1..=5;
    ListGroupsResponse: 1..=5;
    ListOffsetsResponse: 2..=10;
    ListPartitionReassignmentsResponse: 0..=0;
    MetadataResponse: 3..=13;
    OffsetCommitResponse: 3..=10;
    OffsetDeleteResponse: 0..=0;
    OffsetFetchResponse: 3..=10;
    OffsetForLeaderEpochResponse: 2..=4;
    ProduceResponse: 3..=13;
    SaslAuthenticateResponse: none;
    SaslHandshakeResponse: none;
    SyncGroupResponse: 1..=5;
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use proto_kafka::protocol::{Decodable, Encodable, Message};

    fn encodes<M: Encodable>(m: &M, version: i16) -> bool {
        m.encode(&mut BytesMut::new(), version).is_ok()
    }

    #[test]
    fn a_throttle_is_carried_in_whole_milliseconds_capped_at_i32() {
        assert_eq!(millis(Duration::from_micros(2_999)), 2);
        assert_eq!(millis(Duration::from_secs(u64::MAX / 4)), i32::MAX);
    }

    /// `m` at `version` as a client reads it, if the codec writes it at all.
    fn round_trip<M: Encodable + Decodable>(m: &M, version: i16) -> Option<M> {
        let mut buf = BytesMut::new();
        m.encode(&mut buf, version).ok()?;
        M::decode(&mut buf.freeze(), version).ok()
    }

    /// For each type, at each of its versions: a client reads back a throttle time set
    /// directly exactly where `throttle` sets one (a field marked ignorable is dropped, not
    /// refused, at versions without it), and a throttled response always encodes.
    macro_rules! check {
        ($($ty:ty),*) => {$(
            for v in <$ty>::VERSIONS.min..=<$ty>::VERSIONS.max {
                let name = std::any::type_name::<$ty>();
                let mut direct = <$ty>::default();
                direct.throttle_time_ms = 1234;
                let mut throttled = <$ty>::default();
                throttled.throttle(1234, v);
                assert!(encodes(&throttled, v), "{name} v{v}: a throttled response must encode");
                let carried = round_trip(&direct, v).is_some_and(|back| back.throttle_time_ms == 1234);
                assert_eq!(throttled.throttle_time_ms == 1234, carried, "{name} v{v}");
                throttled.throttle(5, v);
                assert!(throttled.throttle_time_ms != 5, "{name} v{v}: the longer throttle stays");
            }
        )*};
    }

    #[test]
    fn each_response_is_throttled_at_exactly_the_versions_its_schema_has_the_field() {
        check!(
            AlterClientQuotasResponse,
            AlterConfigsResponse,
            AlterPartitionReassignmentsResponse,
            AlterUserScramCredentialsResponse,
            ApiVersionsResponse,
            CreateAclsResponse,
            CreatePartitionsResponse,
            CreateTopicsResponse,
            DeleteAclsResponse,
            DeleteGroupsResponse,
            DeleteRecordsResponse,
            DeleteTopicsResponse,
            DescribeAclsResponse,
            DescribeClientQuotasResponse,
            DescribeClusterResponse,
            DescribeConfigsResponse,
            DescribeGroupsResponse,
            DescribeLogDirsResponse,
            DescribeProducersResponse,
            DescribeUserScramCredentialsResponse,
            ElectLeadersResponse,
            FindCoordinatorResponse,
            HeartbeatResponse,
            IncrementalAlterConfigsResponse,
            InitProducerIdResponse,
            JoinGroupResponse,
            LeaveGroupResponse,
            ListGroupsResponse,
            ListOffsetsResponse,
            ListPartitionReassignmentsResponse,
            MetadataResponse,
            OffsetCommitResponse,
            OffsetDeleteResponse,
            OffsetFetchResponse,
            OffsetForLeaderEpochResponse,
            ProduceResponse,
            SyncGroupResponse
        );
        // SASL's responses have no throttle time at any version.
        for v in 0..=2 {
            let mut r = SaslAuthenticateResponse::default();
            r.throttle(1234, v);
            assert!(r == SaslAuthenticateResponse::default());
        }
    }
}
