//! Kafka API dispatch: one module per API, each declaring the versions it serves in a
//! `SPEC` and handling requests with one signature; the table below (`api_table!`) is the
//! only list of them, and ApiVersions, dispatch and the inspector come from it. A
//! request that cannot be served (unknown key, unsupported version, undecodable body) is
//! a `Fault`: the connection is closed with the reason logged, as Kafka does. Kafka error
//! codes, by contrast, are data inside responses.

pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
mod authz;
mod checked;
mod context;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
#[cfg(test)]
mod fake;
pub mod fetch;
pub mod find_coordinator;
mod group_call;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod inspect;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;

use std::rc::Rc;

use bytes::Bytes;
use proto_kafka::messages::ApiKey;
use proto_kafka::protocol::{Decodable, Encodable, HeaderVersion};

use crate::auth::sasl::{ConnSecurity, Gate};
use crate::auth::Session;
use crate::protocol::fit::Fit;
use crate::protocol::header;
use crate::protocol::response::{self, Response};
use crate::protocol::throttle::Throttle;

pub use context::Broker;

/// The versions of one API this broker serves.
#[derive(Debug, Clone, Copy)]
pub struct ApiSpec {
    pub key: ApiKey,
    /// Lowest version handled.
    pub min: i16,
    pub max: i16,
    /// Lowest version advertised in ApiVersions. Below `min` only where Kafka does the same
    /// so that older clients keep working: Produce from 0 (KAFKA-18659: librdkafka before
    /// 2.11.1 disables compression when Produce v0 is not advertised).
    pub advertised_min: i16,
}

impl ApiSpec {
    pub const fn new(key: ApiKey, min: i16, max: i16) -> ApiSpec {
        ApiSpec { key, min, max, advertised_min: min }
    }
}

/// The one table of the APIs this broker serves: each row is Kafka's API key, the module
/// that handles it (its `SPEC` of versions, and `handle`), and the request body it decodes.
/// The ApiVersions list (`APIS`), dispatch (`route`) and the fuzzing inspector's decoder
/// (`decode_body`) are all generated from it; nothing else lists the APIs.
macro_rules! api_table {
    ($($key:ident => $module:ident, $request:ident;)*) => {
        /// Every API served, in the order ApiVersions lists them.
        pub const APIS: &[ApiSpec] = &[$($module::SPEC,)*];

        /// Runs the handler of `req.api`.
        async fn route(broker: &impl Broker, req: Request) -> Outcome {
            match req.api {
                $(ApiKey::$key => $module::handle(broker, req).await,)*
                other => Err(Fault::UnknownApi(other as i16)),
            }
        }

        /// Decodes a request body with its API's generated decoder, as its handler would.
        pub(crate) fn decode_body(api: ApiKey, version: i16, body: &Bytes) -> Result<(), Fault> {
            match api {
                $(ApiKey::$key => decode_as::<proto_kafka::messages::$request>(api, version, body).map(drop),)*
                other => Err(Fault::UnknownApi(other as i16)),
            }
        }

        #[cfg(test)]
        mod table {
            use super::*;

            #[test]
            fn every_row_is_its_own_modules_api() {
                $(assert_eq!($module::SPEC.key, ApiKey::$key, stringify!($module));)*
            }
        }
    };
}

api_table! {
    Produce => produce, ProduceRequest;
    Fetch => fetch, FetchRequest;
    ListOffsets => list_offsets, ListOffsetsRequest;
    Metadata => metadata, MetadataRequest;
    OffsetForLeaderEpoch => offset_for_leader_epoch, OffsetForLeaderEpochRequest;
    ApiVersions => api_versions, ApiVersionsRequest;
    CreateTopics => create_topics, CreateTopicsRequest;
    DeleteTopics => delete_topics, DeleteTopicsRequest;
    CreatePartitions => create_partitions, CreatePartitionsRequest;
    DeleteRecords => delete_records, DeleteRecordsRequest;
    DescribeLogDirs => describe_log_dirs, DescribeLogDirsRequest;
    DescribeConfigs => describe_configs, DescribeConfigsRequest;
    IncrementalAlterConfigs => incremental_alter_configs, IncrementalAlterConfigsRequest;
    AlterConfigs => alter_configs, AlterConfigsRequest;
    DescribeCluster => describe_cluster, DescribeClusterRequest;
    FindCoordinator => find_coordinator, FindCoordinatorRequest;
    JoinGroup => join_group, JoinGroupRequest;
    SyncGroup => sync_group, SyncGroupRequest;
    Heartbeat => heartbeat, HeartbeatRequest;
    LeaveGroup => leave_group, LeaveGroupRequest;
    OffsetCommit => offset_commit, OffsetCommitRequest;
    OffsetFetch => offset_fetch, OffsetFetchRequest;
    ListGroups => list_groups, ListGroupsRequest;
    DescribeGroups => describe_groups, DescribeGroupsRequest;
    DeleteGroups => delete_groups, DeleteGroupsRequest;
    OffsetDelete => offset_delete, OffsetDeleteRequest;
    InitProducerId => init_producer_id, InitProducerIdRequest;
    DescribeProducers => describe_producers, DescribeProducersRequest;
    SaslHandshake => sasl_handshake, SaslHandshakeRequest;
    SaslAuthenticate => sasl_authenticate, SaslAuthenticateRequest;
    CreateAcls => create_acls, CreateAclsRequest;
    DescribeAcls => describe_acls, DescribeAclsRequest;
    DeleteAcls => delete_acls, DeleteAclsRequest;
    DescribeUserScramCredentials => describe_user_scram_credentials, DescribeUserScramCredentialsRequest;
    AlterUserScramCredentials => alter_user_scram_credentials, AlterUserScramCredentialsRequest;
    DescribeClientQuotas => describe_client_quotas, DescribeClientQuotasRequest;
    AlterClientQuotas => alter_client_quotas, AlterClientQuotasRequest;
    AlterPartitionReassignments => alter_partition_reassignments, AlterPartitionReassignmentsRequest;
    ListPartitionReassignments => list_partition_reassignments, ListPartitionReassignmentsRequest;
    ElectLeaders => elect_leaders, ElectLeadersRequest;
}

fn decode_as<T: Decodable>(api: ApiKey, version: i16, body: &Bytes) -> Result<T, Fault> {
    T::decode(&mut body.clone(), version).map_err(|e| Fault::Decode { api, version, reason: Undecodable::Body(e) })
}

pub fn spec(key: ApiKey) -> Option<&'static ApiSpec> {
    APIS.iter().find(|s| s.key == key)
}

/// A request whose header has been parsed.
pub struct Request {
    pub api: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    /// The client's address (DescribeGroups shows it as the member's host).
    pub peer: std::net::SocketAddr,
    pub body: Bytes,
    /// Who sent it (the principal ACLs are checked against).
    pub session: Rc<Session>,
    /// The connection's security state and listener (answers carry the listener's
    /// advertised address).
    pub conn: Rc<ConnSecurity>,
}

/// Why a request closes its connection instead of being answered.
#[derive(Debug, thiserror::Error)]
pub enum Fault {
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("{api:?} v{version} is not supported (this broker serves v{min}-v{max})")]
    UnsupportedVersion { api: ApiKey, version: i16, min: i16, max: i16 },
    #[error("cannot decode {api:?} v{version}: {reason}")]
    Decode {
        api: ApiKey,
        version: i16,
        #[source]
        reason: Undecodable,
    },
    #[error("cannot encode the {api:?} response: {reason}")]
    Encode {
        api: ApiKey,
        #[source]
        reason: proto_kafka::ProtoError,
    },
    #[error("request too short for a header")]
    NoHeader,
    /// Out of place in the SASL exchange, or a failed authentication.
    #[error("{0}")]
    Authentication(String),
    /// An acks=0 produce that failed on some partition. Kafka closes the connection then:
    /// the producer hears of nothing else, and reconnecting makes it refresh its metadata.
    #[error("acks=0 produce refused ({0}): closing the connection so that the producer refreshes its metadata")]
    UnacknowledgedProduce(String),
}

/// What in a request's bytes could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Undecodable {
    #[error("header: {0}")]
    Header(#[source] proto_kafka::ProtoError),
    #[error("{0}")]
    Body(#[source] proto_kafka::ProtoError),
    /// A produced batch the log would refuse (the fuzzing inspector's check).
    #[error("record batch: {0:?}")]
    Batch(#[source] crate::protocol::batch::BatchError),
}

pub type Outcome = Result<Option<Response>, Fault>;

impl Fault {
    /// How the refusal is counted in `ringbroker_request_errors_total`.
    pub fn kind(&self) -> crate::metrics::ErrorKind {
        use crate::metrics::ErrorKind;
        match self {
            Fault::UnknownApi(_) => ErrorKind::UnknownApi,
            Fault::UnsupportedVersion { .. } => ErrorKind::UnsupportedVersion,
            Fault::Decode { .. } | Fault::NoHeader => ErrorKind::Decode,
            Fault::Encode { .. } => ErrorKind::Encode,
            Fault::Authentication(_) => ErrorKind::Authentication,
            Fault::UnacknowledgedProduce(_) => ErrorKind::ErrorCode,
        }
    }
}

impl Request {
    pub fn decode<T: Decodable>(&self) -> Result<T, Fault> {
        decode_as(self.api, self.version, &self.body)
    }

    /// The response frame of `msg`, fitted to the request's version.
    /// The answer, encoded at the request's version, carrying the request quota's throttle
    /// (charged now that the handler is done; see `metrics::charge_request_quota`).
    pub fn respond<M: Encodable + HeaderVersion + Fit + Throttle>(&self, mut msg: M) -> Outcome {
        let throttle = crate::metrics::charge_request_quota();
        if !throttle.is_zero() {
            msg.throttle(crate::protocol::throttle::millis(throttle), self.version);
        }
        response::encode(self.api, self.version, self.correlation_id, msg)
            .map(Some)
            .map_err(|e| Fault::Encode { api: self.api, reason: e })
    }
}

/// The API of a request this broker serves at the version asked for.
fn admit(pre: &header::Preamble) -> Result<ApiKey, Fault> {
    let api = ApiKey::try_from(pre.api_key).map_err(|_| Fault::UnknownApi(pre.api_key))?;
    let Some(spec) = spec(api) else {
        return Err(Fault::UnknownApi(pre.api_key));
    };
    if pre.api_version < spec.min || pre.api_version > spec.max {
        return Err(Fault::UnsupportedVersion { api, version: pre.api_version, min: spec.min, max: spec.max });
    }
    Ok(api)
}

/// Parses a request frame (without its size prefix) and runs its handler, if the
/// connection's security state lets it through (see `auth::sasl`).
pub async fn dispatch(broker: &impl Broker, frame: Bytes, conn: &Rc<ConnSecurity>) -> Outcome {
    if let Gate::LegacyToken = conn.gate() {
        return sasl_authenticate::legacy_token(broker, conn, &frame).await;
    }
    let pre = header::preamble(&frame).ok_or(Fault::NoHeader)?;
    let api = match admit(&pre) {
        // Kafka's rule: answer an unknown ApiVersions version with a v0 body carrying
        // UNSUPPORTED_VERSION and our table, so the client can pick a version it knows.
        Err(Fault::UnsupportedVersion { api: ApiKey::ApiVersions, .. }) => {
            return api_versions::unsupported(pre.correlation_id);
        }
        r => r?,
    };
    if let Some(reason) = conn.refuses(api, std::time::Instant::now()) {
        return Err(Fault::Authentication(reason));
    }
    let (hdr, body) = header::parse(api, pre.api_version, frame).map_err(|e| Fault::Decode {
        api,
        version: pre.api_version,
        reason: Undecodable::Header(e),
    })?;
    let req = Request {
        api,
        version: pre.api_version,
        correlation_id: pre.correlation_id,
        client_id: hdr.client_id.map(|c| c.to_string()),
        peer: conn.peer,
        body,
        session: conn.session(),
        conn: conn.clone(),
    };
    route(broker, req).await
}

/// A string for a response field.
pub fn str_bytes(s: impl Into<String>) -> proto_kafka::protocol::StrBytes {
    proto_kafka::protocol::StrBytes::from_string(s.into())
}
