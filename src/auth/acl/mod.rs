//! Kafka's ACLs: what an ACL says (`model`) and the authorizer's decision over all of them
//! (`authorizer`, Kafka's `StandardAuthorizer`).
//!
//! An ACL (`AclBinding`) says that a principal, connecting from a host, is ALLOWed or DENYed
//! one operation on the resources of one type whose names match a pattern. `Acls` is the
//! immutable, indexed snapshot of every ACL that each shard asks on every request.
//!
//! This module does no I/O.

mod authorizer;
mod model;

pub use authorizer::{Acls, AuthorizerConfig};
pub use model::{
    AclBinding, AclFilter, AclRefused, Operation, PatternFilter, PatternType, Permission, ResourceType, CLUSTER_NAME,
    WILDCARD, WILDCARD_PRINCIPAL,
};

/// Principals and bindings shared by the model's and the authorizer's tests.
#[cfg(test)]
mod fixtures {
    use super::*;

    pub(super) const ALICE: &str = "User:alice";
    pub(super) const BOB: &str = "User:bob";

    pub(super) fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.to_string(),
            pattern,
            principal: principal.to_string(),
            host: WILDCARD.to_string(),
            operation,
            permission,
        }
    }

    pub(super) fn topic_acl(
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        acl(ResourceType::Topic, name, pattern, principal, op, perm)
    }
}
