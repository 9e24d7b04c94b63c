//! Authentication and authorization: who a connection is (`Session`: its principal, from a
//! SASL exchange or a client certificate) and what it may do (`acl`).
//!
//! - `acl`: Kafka's ACL model (resource patterns, operations and their implications, ALLOW
//!   and DENY) and the authorizer's decision, on an immutable snapshot each shard holds.
//! - `scram`, `plain`: the SASL mechanisms' server side; credentials are stored salted and
//!   hashed (`scram::ScramCredential`), and PLAIN is checked against those same credentials.

pub mod acl;
pub mod plain;
pub mod sasl;
pub mod scram;

use std::net::IpAddr;

/// Kafka's principal of a connection that has not authenticated (PLAINTEXT and SSL without
/// a client certificate).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Who sent a request: the principal (`User:alice`) and the host it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub principal: String,
    pub host: IpAddr,
}

impl Session {
    /// The user name of a `User:` principal (what per-user quotas are keyed by).
    pub fn user(&self) -> Option<&str> {
        self.principal.strip_prefix("User:")
    }
}
