//! The SASL and TLS layers on the wire, driven byte by byte with the raw test client: the
//! order of the SASL exchange, the legacy unframed tokens after a v0 handshake,
//! re-authentication (KIP-368), and hostile input before authentication — garbage in the
//! TLS handshake, an unknown mechanism, an oversized frame — each closing only that
//! connection, and only after the failed-authentication delay, while another client keeps
//! working.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ringbroker::auth::acl::{Operation, PatternType, Permission, ResourceType};
use ringbroker::auth::scram::Mechanism;
use ringbroker::protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use ringbroker::protocol::ErrorCode;
use support::client;
use support::client::{sb, Client};
use support::security;

/// The failed-authentication delay these brokers use: long enough to tell from an
/// immediate close.
const DELAY_MS: u64 = 600;

fn start(extra: &[&str]) -> support::Broker {
    let delay = DELAY_MS.to_string();
    let mut args = vec![
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--connection-failed-authentication-delay-ms",
        &delay,
    ];
    args.extend_from_slice(extra);
    let broker = support::Broker::start_args(&args);
    for (user, password) in [("alice", "alice-pw"), ("bob", "bob-pw")] {
        security::add_user(broker.listener("PLAINTEXT"), user, password, Mechanism::Sha512);
    }
    broker
}

fn handshake(c: &mut Client, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let mut req = SaslHandshakeRequest::default();
    req.mechanism = sb(mechanism);
    c.call(ApiKey::SaslHandshake, version, &req)
}

fn authenticate(c: &mut Client, version: i16, token: &[u8]) -> SaslAuthenticateResponse {
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = token.to_vec().into();
    c.call(ApiKey::SaslAuthenticate, version, &req)
}

/// Logs in with PLAIN through SaslAuthenticate `version`; returns the session lifetime.
fn login(c: &mut Client, version: i16, user: &str, password: &str) -> i64 {
    let h = handshake(c, 1, "PLAIN");
    assert_eq!(h.error_code, 0);
    let a = authenticate(c, version, &security::plain_token(user, password));
    assert_eq!(a.error_code, 0, "{:?}", a.error_message);
    a.session_lifetime_ms
}

fn metadata(c: &mut Client) -> MetadataResponse {
    c.call(ApiKey::Metadata, 12, &MetadataRequest::default())
}

/// Waits for the broker to close `c`; returns how long that took.
fn closed_after(c: &mut Client, since: Instant) -> Duration {
    assert!(c.wait_closed(Duration::from_secs(10)), "the broker kept the connection open");
    since.elapsed()
}

/// A PLAINTEXT client that produces and reads back one record: "nothing else is affected".
fn bystander_works(broker: &support::Broker, topic: &str) {
    let mut c = Client::connect(broker.listener("PLAINTEXT"));
    c.create_topic(topic, 1, &[]);
    let offset = c.produce_ok(topic, 0, client::batch(client::now_ms(), &[b"still here".to_vec()]));
    assert_eq!(c.fetch_all(topic, 0, offset).len(), 1);
}

#[test]
fn requests_before_authentication_close_the_connection_after_the_delay() {
    let broker = start(&[]);
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    // ApiVersions is always allowed: clients ask it first.
    assert_eq!(c.api_versions().error_code, 0);
    c.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    let took = closed_after(&mut c, Instant::now());
    assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}, before the delay");
    bystander_works(&broker, "bystander-1");

    // After authenticating, the same request is served.
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(login(&mut c, 2, "alice", "alice-pw"), 0, "no re-authentication is configured");
    assert!(!metadata(&mut c).brokers.is_empty());
}

#[test]
fn a_wrong_password_fails_the_same_way_as_an_unknown_user() {
    let broker = start(&[]);
    let mut messages = Vec::new();
    for (user, password) in [("alice", "wrong"), ("nobody", "wrong")] {
        let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
        assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, 0);
        let sent = Instant::now();
        let a = authenticate(&mut c, 2, &security::plain_token(user, password));
        assert_eq!(a.error_code, ErrorCode::SaslAuthenticationFailed.code());
        let answered = sent.elapsed();
        assert!(answered >= Duration::from_millis(DELAY_MS - 50), "a failure answered after {answered:?}");
        messages.push(a.error_message.map(|m| m.to_string()));
        let took = closed_after(&mut c, sent);
        assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}");
    }
    assert_eq!(messages[0], messages[1], "the answer must not tell whether the user exists");
    assert!(messages[0].as_deref().unwrap_or_default().contains("Authentication failed"));
}

#[test]
fn an_unknown_mechanism_is_refused_with_the_enabled_list() {
    let broker = start(&["--sasl-enabled-mechanisms", "SCRAM-SHA-512,PLAIN"]);
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    let sent = Instant::now();
    let h = handshake(&mut c, 1, "GSSAPI");
    assert_eq!(h.error_code, ErrorCode::UnsupportedSaslMechanism.code());
    let offered: Vec<String> = h.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["SCRAM-SHA-512", "PLAIN"]);
    let took = closed_after(&mut c, sent);
    assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}");
    bystander_works(&broker, "bystander-2");
}

#[test]
fn an_oversized_frame_before_authentication_is_refused_but_allowed_after() {
    let broker = start(&["--sasl-server-max-receive-size", "4096"]);
    let big = Client::raw_frame(ApiKey::Metadata as i16, 12, 7, 2, &vec![0u8; 8192]);

    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    let sent = Instant::now();
    // The broker may close before reading it all: a failed write is fine.
    let _ = c.write_raw(&big);
    let took = closed_after(&mut c, sent);
    assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}");

    // Once authenticated, the cap is max_request_bytes: a Metadata request naming 100
    // long topic names (over 6 KiB) is answered.
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    login(&mut c, 2, "alice", "alice-pw");
    let names: Vec<String> = (0..100).map(|i| format!("{i:03}-{}", "x".repeat(60))).collect();
    let mut req = MetadataRequest::default();
    req.allow_auto_topic_creation = false;
    req.topics = Some(
        names
            .iter()
            .map(|n| {
                let mut t = ringbroker::protocol::messages::metadata_request::MetadataRequestTopic::default();
                t.name = Some(client::topic_name(n));
                t
            })
            .collect(),
    );
    assert!(Client::frame(ApiKey::Metadata, 12, 9, &req).len() > 6000);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    assert_eq!(r.topics.len(), 100);
    assert!(
        r.topics.iter().all(|t| t.error_code == ErrorCode::UnknownTopicOrPartition.code()),
        "UNKNOWN_TOPIC_OR_PARTITION for each"
    );
    bystander_works(&broker, "bystander-3");
}

#[test]
fn garbage_in_the_sasl_exchange_closes_only_that_connection_after_the_delay() {
    let broker = start(&[]);
    // Random bytes where a request should be, before any handshake.
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    let noise: Vec<u8> = (0..64u32).map(|i| (i.wrapping_mul(2654435761) >> 7) as u8).collect();
    let sent = Instant::now();
    let _ = c.write_raw(&noise);
    let took = closed_after(&mut c, sent);
    assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}");
    // A SaslAuthenticate whose body does not decode, in the middle of the exchange.
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(handshake(&mut c, 1, "SCRAM-SHA-512").error_code, 0);
    let sent = Instant::now();
    c.write_raw(&Client::raw_frame(ApiKey::SaslAuthenticate as i16, 2, 5, 2, &[0xff, 0xff, 0xff])).unwrap();
    let took = closed_after(&mut c, sent);
    assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}");
    // A SCRAM client-first message that is not one.
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(handshake(&mut c, 1, "SCRAM-SHA-512").error_code, 0);
    let a = authenticate(&mut c, 2, b"\x00\x01not scram at all");
    assert_eq!(a.error_code, ErrorCode::SaslAuthenticationFailed.code());
    assert!(c.wait_closed(Duration::from_secs(10)));
    bystander_works(&broker, "bystander-garbage");
}

#[test]
fn a_request_pipelined_behind_a_plain_login_is_refused_not_served_early() {
    let broker = start(&[]);
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(handshake(&mut c, 1, "PLAIN").error_code, 0);
    // Both frames in one write: the Metadata request arrives while the password is checked.
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = security::plain_token("alice", "alice-pw").into();
    let mut both = Client::frame(ApiKey::SaslAuthenticate, 2, 41, &req);
    both.extend(Client::frame(ApiKey::Metadata, 12, 42, &MetadataRequest::default()));
    c.write_raw(&both).unwrap();
    let first = c.read_frame().unwrap().expect("the SaslAuthenticate answer");
    assert_eq!(i32::from_be_bytes(first[..4].try_into().unwrap()), 41);
    assert!(c.wait_closed(Duration::from_secs(10)), "the pipelined request closed the connection");
    // Sent after the answer, the same request is served.
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    login(&mut c, 2, "alice", "alice-pw");
    assert!(!metadata(&mut c).brokers.is_empty());
}

#[test]
fn legacy_unframed_tokens_follow_a_v0_handshake() {
    let broker = start(&[]);
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(handshake(&mut c, 0, "PLAIN").error_code, 0);
    // The token goes as a bare size-prefixed frame, and the answer comes back the same way.
    let token = security::plain_token("bob", "bob-pw");
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&token);
    c.write_raw(&frame).unwrap();
    let mut size = [0u8; 4];
    c.stream().read_exact(&mut size).unwrap();
    assert_eq!(i32::from_be_bytes(size), 0, "PLAIN answers an empty token");
    assert!(!metadata(&mut c).brokers.is_empty(), "authenticated after the legacy exchange");

    // A token shorter than a request header ("\0b\0pw", 5 bytes) is a token all the same.
    security::add_user(broker.listener("PLAINTEXT"), "b", "pw", Mechanism::Sha512);
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(handshake(&mut c, 0, "PLAIN").error_code, 0);
    let token = security::plain_token("b", "pw");
    assert!(token.len() < 8);
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&token);
    c.write_raw(&frame).unwrap();
    c.stream().read_exact(&mut size).unwrap();
    assert_eq!(i32::from_be_bytes(size), 0, "PLAIN answers an empty token");
    assert!(!metadata(&mut c).brokers.is_empty(), "authenticated with a short legacy token");

    // A wrong password in the legacy form cannot be answered: the connection closes.
    let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(handshake(&mut c, 0, "PLAIN").error_code, 0);
    let token = security::plain_token("bob", "nope");
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&token);
    let sent = Instant::now();
    c.stream().write_all(&frame).unwrap();
    let took = closed_after(&mut c, sent);
    assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}");
}

#[test]
fn sessions_expire_unless_the_client_reauthenticates_as_itself() {
    let broker = start(&["--connections-max-reauth-ms", "1500"]);

    // A client that never re-authenticates is disconnected at its next request after expiry.
    let mut idle = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(login(&mut idle, 1, "alice", "alice-pw"), 1500, "SaslAuthenticate v1+ tells the session lifetime");

    // One that re-authenticates before expiry keeps going past the first session's end.
    let mut renewing = Client::connect(broker.listener("SASL_PLAINTEXT"));
    login(&mut renewing, 2, "alice", "alice-pw");
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(login(&mut renewing, 2, "alice", "alice-pw"), 1500);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!metadata(&mut renewing).brokers.is_empty(), "the renewed session is still valid");

    idle.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(idle.wait_closed(Duration::from_secs(10)), "an expired session is disconnected");

    // Re-authenticating with another mechanism is refused, as in Kafka.
    let mut switching_mechanism = Client::connect(broker.listener("SASL_PLAINTEXT"));
    login(&mut switching_mechanism, 2, "alice", "alice-pw");
    assert_eq!(
        handshake(&mut switching_mechanism, 1, "SCRAM-SHA-512").error_code,
        ErrorCode::UnsupportedSaslMechanism.code()
    );
    assert!(switching_mechanism.wait_closed(Duration::from_secs(10)));

    // Re-authenticating as someone else fails and closes the connection.
    let mut switching = Client::connect(broker.listener("SASL_PLAINTEXT"));
    login(&mut switching, 2, "alice", "alice-pw");
    assert_eq!(handshake(&mut switching, 1, "PLAIN").error_code, 0);
    let a = authenticate(&mut switching, 2, &security::plain_token("bob", "bob-pw"));
    assert_eq!(a.error_code, ErrorCode::SaslAuthenticationFailed.code());
    assert!(switching.wait_closed(Duration::from_secs(10)));

    let admin = broker.admin_addr.expect("admin listener");
    let page = support::scrape(admin);
    assert!(support::metric_sum(&page, "ringbroker_sasl_authentications_total", &[]) >= 4.0);
    assert!(support::metric_sum(&page, "ringbroker_sasl_authentication_failures_total", &[]) >= 1.0);
}

#[test]
fn garbage_in_the_tls_handshake_closes_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    // A self-signed certificate is enough: no client completes a handshake here.
    let cert = dir.path().join("c.pem");
    let key = dir.path().join("k.pem");
    let ok = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the openssl command line (install openssl)");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let delay = DELAY_MS.to_string();
    let broker = support::Broker::start_args(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "--ssl-certificate-file",
        cert.to_str().unwrap(),
        "--ssl-key-file",
        key.to_str().unwrap(),
        "--connection-failed-authentication-delay-ms",
        &delay,
    ]);
    // A Kafka request where a TLS ClientHello should be.
    let mut c = Client::connect(broker.listener("SSL"));
    let sent = Instant::now();
    c.write_raw(&Client::frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default())).unwrap();
    let took = closed_after(&mut c, sent);
    assert!(took >= Duration::from_millis(DELAY_MS - 50), "closed after {took:?}");
    // Random bytes.
    let mut c = Client::connect(broker.listener("SSL"));
    let noise: Vec<u8> = (0..2000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let _ = c.write_raw(&noise);
    closed_after(&mut c, Instant::now());
    bystander_works(&broker, "bystander-tls");
    let page = support::scrape(broker.admin_addr.expect("admin listener"));
    assert!(support::metric_sum(&page, "ringbroker_tls_handshake_failures_total", &[]) >= 2.0);
}

#[test]
fn users_and_acls_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let args = security::secured_args(true);
    let mut broker = support::Broker::start_in(dir.path(), "127.0.0.1:0", &args);
    let admin = broker.listener("PLAINTEXT");
    security::add_user(admin, "alice", "alice-pw", Mechanism::Sha512);
    security::create_topics(admin, &["seen", "unseen"]);
    let describe_seen = security::acl(
        Permission::Allow,
        "User:alice",
        ResourceType::Topic,
        PatternType::Literal,
        "seen",
        Operation::Describe,
    );
    security::create_acls(admin, vec![describe_seen]);

    let visible = |broker: &support::Broker| {
        let mut c = Client::connect(broker.listener("SASL_PLAINTEXT"));
        login(&mut c, 2, "alice", "alice-pw");
        let mut req = MetadataRequest::default();
        req.topics = None;
        let m: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
        let mut names: Vec<String> = m.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.to_string())).collect();
        names.sort();
        names
    };
    assert_eq!(visible(&broker), ["seen"]);
    assert_eq!(broker.stop().map(|s| s.success()), Some(true));
    let broker = support::restart(dir.path(), "127.0.0.1:0", &args);
    assert_eq!(visible(&broker), ["seen"], "the credential and the ACL came back from the catalog");
}

#[test]
fn unacceptable_credential_changes_are_refused_per_user() {
    use ringbroker::protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use ringbroker::protocol::messages::{AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse};
    let broker = start(&[]);
    let upsert = |name: &str, mechanism: i8, iterations: i32| {
        let mut up = ScramCredentialUpsertion::default();
        up.name = sb(name);
        up.mechanism = mechanism;
        up.iterations = iterations;
        up.salt = vec![1u8; 16].into();
        up.salted_password = vec![2u8; 64].into();
        up
    };
    let mut req = AlterUserScramCredentialsRequest::default();
    req.upsertions = vec![
        upsert("few-iterations", 2, 100),
        upsert("twice", 2, 4096),
        upsert("twice", 2, 8192),
        // One change per user and request, whatever the mechanisms (Kafka's rule).
        upsert("two-mechanisms", 1, 4096),
        upsert("two-mechanisms", 2, 4096),
        upsert("odd-mechanism", 9, 4096),
        upsert("", 2, 4096),
        upsert("fine", 1, 4096),
    ];
    let mut gone = ScramCredentialDeletion::default();
    gone.name = sb("never-set");
    gone.mechanism = 2;
    req.deletions = vec![gone];
    let mut c = Client::connect(broker.listener("PLAINTEXT"));
    let resp: AlterUserScramCredentialsResponse = c.call(ApiKey::AlterUserScramCredentials, 0, &req);
    let code = |user: &str| resp.results.iter().find(|r| r.user.as_str() == user).map(|r| r.error_code);
    assert_eq!(code("few-iterations"), Some(93), "UNACCEPTABLE_CREDENTIAL");
    assert_eq!(code("twice"), Some(92), "DUPLICATE_RESOURCE");
    assert_eq!(code("two-mechanisms"), Some(92), "DUPLICATE_RESOURCE");
    assert_eq!(code("odd-mechanism"), Some(33), "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(code(""), Some(93));
    assert_eq!(code("never-set"), Some(91), "RESOURCE_NOT_FOUND");
    assert_eq!(code("fine"), Some(0), "the others do not hold back a valid change");
    // Refused users got none of their changes: "twice" cannot log in with either.
    let mut s = Client::connect(broker.listener("SASL_PLAINTEXT"));
    assert_eq!(handshake(&mut s, 1, "PLAIN").error_code, 0);
    assert_eq!(
        authenticate(&mut s, 2, &security::plain_token("twice", "anything")).error_code,
        ErrorCode::SaslAuthenticationFailed.code()
    );
}
