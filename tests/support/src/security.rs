//! Setting up a secured broker for a test: the flags of a broker with an admin listener beside
//! its secured ones, and the admin's requests over that PLAINTEXT listener (SCRAM users, topics,
//! ACLs) with the library's blocking client, `ringbroker::client::Conn`. Also the requests of a
//! SASL PLAIN login, for a test to send on its own connection.
//!
//! The admin helpers take the PLAINTEXT listener's address (`broker.listener("PLAINTEXT")`),
//! open a connection for the one request and panic unless every part of it succeeded.

use std::net::SocketAddr;
use std::time::Duration;

use ringbroker::auth::acl::{Operation, PatternType, Permission, ResourceType};
use ringbroker::auth::scram::{self, Mechanism};
use ringbroker::client::Conn;
use ringbroker::protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use ringbroker::protocol::messages::create_acls_request::AclCreation;
use ringbroker::protocol::messages::create_topics_request::CreatableTopic;
use ringbroker::protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, CreateAclsRequest, CreateAclsResponse,
    CreateTopicsRequest, CreateTopicsResponse, SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};

use crate::client::sb;

/// The broker flags for two listeners: PLAINTEXT, whose clients are `User:ANONYMOUS`, a super
/// user (the admin connection), and SASL_PLAINTEXT, where users log in; the authorizer on or
/// off as `authorizer` says.
pub fn secured_args(authorizer: bool) -> [&'static str; 6] {
    [
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--authorizer-enabled",
        if authorizer { "true" } else { "false" },
        "--super-users",
        "User:ANONYMOUS",
    ]
}

/// The broker flags for one listener of each protocol: PLAINTEXT (the admin connection), SSL,
/// SASL_PLAINTEXT and SASL_SSL, serving the certificate `cert` with its key `key` and
/// trusting client certificates signed by `ca` (PEM files).
pub fn every_listener_args<'a>(cert: &'a str, key: &'a str, ca: &'a str) -> Vec<&'a str> {
    vec![
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "--ssl-certificate-file",
        cert,
        "--ssl-key-file",
        key,
        "--ssl-ca-file",
        ca,
    ]
}

/// A connection to the admin listener at `admin`. Reads are bounded so that a broker that
/// never answers fails the test instead of hanging it.
fn connect(admin: SocketAddr) -> Conn {
    Conn::connect_timeout(admin, Duration::from_secs(10), Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("connect to the admin listener at {admin}: {e:#}"))
}

/// Sets a SCRAM credential for `user` (4096 iterations) through the admin listener
/// (AlterUserScramCredentials, as Kafka's admin client sends it: the salted password, never
/// the password).
pub fn add_user(admin: SocketAddr, user: &str, password: &str, mechanism: Mechanism) {
    let salt = scram::random_bytes(24);
    let mut up = ScramCredentialUpsertion::default();
    up.name = sb(user);
    up.mechanism = mechanism.code();
    up.iterations = 4096;
    up.salted_password = scram::salted_password(mechanism, password, &salt, 4096).into();
    up.salt = salt.into();
    let mut req = AlterUserScramCredentialsRequest::default();
    req.upsertions = vec![up];
    let resp: AlterUserScramCredentialsResponse =
        connect(admin).call(ApiKey::AlterUserScramCredentials, 0, &req).expect("AlterUserScramCredentials");
    assert_eq!(resp.results.len(), 1);
    assert_eq!(resp.results[0].error_code, 0, "adding {user}: {:?}", resp.results[0].error_message);
}

/// Creates topics of one partition each through the admin listener (CreateTopics v5).
pub fn create_topics(admin: SocketAddr, names: &[&str]) {
    let mut req = CreateTopicsRequest::default();
    for name in names {
        let mut t = CreatableTopic::default();
        t.name = TopicName(sb(name));
        t.num_partitions = 1;
        t.replication_factor = 1;
        req.topics.push(t);
    }
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = connect(admin).call(ApiKey::CreateTopics, 5, &req).expect("CreateTopics");
    for t in &resp.topics {
        assert_eq!(t.error_code, 0, "creating {}: {:?}", t.name.as_str(), t.error_message);
    }
}

/// One ACL, for any host: `permission` for `principal` (`User:name`) to do `op` on the
/// resources of `resource` type that `name` matches under `pattern`.
pub fn acl(
    permission: Permission,
    principal: &str,
    resource: ResourceType,
    pattern: PatternType,
    name: &str,
    op: Operation,
) -> AclCreation {
    let mut a = AclCreation::default();
    a.resource_type = resource.code();
    a.resource_name = sb(name);
    a.resource_pattern_type = pattern.code();
    a.principal = sb(principal);
    a.host = sb("*");
    a.operation = op.code();
    a.permission_type = permission.code();
    a
}

/// CreateAcls v3 through the admin listener: the raw answer, for tests of a refusal.
pub fn try_create_acls(admin: SocketAddr, acls: Vec<AclCreation>) -> CreateAclsResponse {
    let mut req = CreateAclsRequest::default();
    req.creations = acls;
    connect(admin).call(ApiKey::CreateAcls, 3, &req).expect("CreateAcls")
}

/// Creates ACLs through the admin listener, checking each was stored (and so is enforced on
/// every shard).
pub fn create_acls(admin: SocketAddr, acls: Vec<AclCreation>) {
    for r in try_create_acls(admin, acls).results {
        assert_eq!(r.error_code, 0, "CreateAcls: {:?}", r.error_message);
    }
}

/// The one message of SASL PLAIN (RFC 4616): no authorization id, then `user` and `password`,
/// each after a NUL.
pub fn plain_token(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

/// The SaslHandshake request that asks for PLAIN.
pub fn plain_handshake() -> SaslHandshakeRequest {
    let mut req = SaslHandshakeRequest::default();
    req.mechanism = sb("PLAIN");
    req
}

/// The SaslAuthenticate request that logs in as `user` with PLAIN, after [`plain_handshake`].
pub fn plain_authenticate(user: &str, password: &str) -> SaslAuthenticateRequest {
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = plain_token(user, password).into();
    req
}
