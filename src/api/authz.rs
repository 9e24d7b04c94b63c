//! The authorization checks handlers make, in Kafka's words: may this request's principal do
//! this operation on this resource? Each is one lookup in the shard's ACL snapshot (always
//! yes without an authorizer).
//!
//! Besides the yes/no questions: the "authorized operations" bit sets that Metadata,
//! DescribeCluster and DescribeGroups return when asked (bit `1 << code` per operation the
//! principal may do, among those Kafka defines for the resource type), and the check of a
//! DescribeConfigs / IncrementalAlterConfigs resource, whose resource type decides which ACL
//! resource is asked about.

use super::{Broker, Request};
use crate::auth::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::protocol::ErrorCode;

pub(super) fn cluster(broker: &impl Broker, req: &Request, op: Operation) -> bool {
    broker.authorize(&req.session, op, ResourceType::Cluster, CLUSTER_NAME)
}

pub(super) fn topic(broker: &impl Broker, req: &Request, op: Operation, name: &str) -> bool {
    broker.authorize(&req.session, op, ResourceType::Topic, name)
}

/// May the principal do `op` on at least one topic (Kafka's `authorizeByResourceType`)?
pub(super) fn any_topic(broker: &impl Broker, req: &Request, op: Operation) -> bool {
    broker.authorize_any(&req.session, op, ResourceType::Topic)
}

pub(super) fn group(broker: &impl Broker, req: &Request, op: Operation, name: &str) -> bool {
    broker.authorize(&req.session, op, ResourceType::Group, name)
}

pub(super) fn transactional_id(broker: &impl Broker, req: &Request, op: Operation, name: &str) -> bool {
    broker.authorize(&req.session, op, ResourceType::TransactionalId, name)
}

/// Why an ACL request (CreateAcls, DescribeAcls, DeleteAcls) is refused, if it is: no
/// authorizer is configured (SECURITY_DISABLED, as Kafka answers), or the principal lacks `op`
/// on the cluster. `what` names the request in the message.
pub(super) fn acl_request_refusal(
    broker: &impl Broker,
    req: &Request,
    op: Operation,
    what: &str,
) -> Option<(ErrorCode, String)> {
    if !broker.authorizer_enabled() {
        return Some((
            ErrorCode::SecurityDisabled,
            "no authorizer is configured: set authorizer_enabled = true".into(),
        ));
    }
    if !cluster(broker, req, op) {
        return Some((ErrorCode::ClusterAuthorizationFailed, format!("{what} needs {} on the cluster", op.name())));
    }
    None
}

/// `Err(TOPIC_AUTHORIZATION_FAILED)` unless the principal may do `op` on the topic: the
/// per-partition answer of the data-plane APIs.
pub(super) fn topic_or_fail(broker: &impl Broker, req: &Request, op: Operation, name: &str) -> Result<(), ErrorCode> {
    if topic(broker, req, op, name) {
        Ok(())
    } else {
        Err(ErrorCode::TopicAuthorizationFailed)
    }
}

/// The operations Kafka reports in "authorized operations" for a resource type
/// (`AclEntry.supportedOperations`).
fn reported_operations(resource: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource {
        ResourceType::Topic => &[Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => {
            &[Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite]
        }
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
    }
}

/// The authorized-operations bit set of one resource: bit `1 << code` for each reported
/// operation the principal may do.
pub(super) fn operations(broker: &impl Broker, req: &Request, resource: ResourceType, name: &str) -> i32 {
    reported_operations(resource)
        .iter()
        .filter(|op| broker.authorize(&req.session, **op, resource, name))
        .fold(0, |bits, op| bits | 1 << op.code())
}

/// The cluster's authorized operations as Metadata and DescribeCluster report them: none at
/// all (0) to a principal that may not DESCRIBE the cluster.
pub(super) fn cluster_operations(broker: &impl Broker, req: &Request) -> i32 {
    if cluster(broker, req, Operation::Describe) {
        operations(broker, req, ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    }
}

// Kafka's ConfigResource.Type codes.
const CONFIG_TOPIC: i8 = 2;
const CONFIG_BROKER: i8 = 4;
const CONFIG_BROKER_LOGGER: i8 = 8;
const CONFIG_CLIENT_METRICS: i8 = 16;
const CONFIG_GROUP: i8 = 32;

/// The check of one DescribeConfigs (`op` DESCRIBE_CONFIGS) or IncrementalAlterConfigs
/// (ALTER_CONFIGS) resource: topics against the topic, groups against the group, broker-wide
/// resources against the cluster. A refusal carries Kafka's message. Resource types Kafka
/// does not define pass here; the handler refuses them.
pub(super) fn config_resource(
    broker: &impl Broker,
    req: &Request,
    op: Operation,
    resource_type: i8,
    name: &str,
) -> Result<(), (ErrorCode, String)> {
    let refusal = match resource_type {
        CONFIG_TOPIC if !topic(broker, req, op, name) => ErrorCode::TopicAuthorizationFailed,
        CONFIG_GROUP if !group(broker, req, op, name) => ErrorCode::GroupAuthorizationFailed,
        CONFIG_BROKER | CONFIG_BROKER_LOGGER | CONFIG_CLIENT_METRICS if !cluster(broker, req, op) => {
            ErrorCode::ClusterAuthorizationFailed
        }
        _ => return Ok(()),
    };
    Err((refusal, refusal.to_string()))
}
