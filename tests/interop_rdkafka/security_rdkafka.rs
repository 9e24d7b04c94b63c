//! librdkafka (rust-rdkafka, built with OpenSSL) over every secured listener: SSL, SSL with a
//! client certificate (mTLS), SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256, and
//! SASL_PLAINTEXT with PLAIN. Each test produces records with acks=all and reads them back;
//! wrong credentials must fail authentication (and be counted), and an untrusted client
//! certificate must fail the TLS handshake.
//!
//! One broker per test, with four listeners: PLAINTEXT (User:ANONYMOUS, used to create users
//! and topics), SSL, SASL_PLAINTEXT and SASL_SSL, and certificates made by the test.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use ringbroker::auth::acl::{Operation, PatternType, Permission, ResourceType};
use ringbroker::auth::scram::Mechanism;
use support::security::{self, acl};
use support::tls;

use crate::librdkafka::{self, Ctx};

const RECORDS: usize = 200;
const TIMEOUT: Duration = Duration::from_secs(30);

struct Setup {
    broker: support::Broker,
    pki: tls::TestPki,
}

fn start(extra: &[&str]) -> Setup {
    let pki = tls::generate("/CN=alice/OU=test/O=ringbroker");
    let cert = pki.server_cert.display().to_string();
    let key = pki.server_key.display().to_string();
    let ca = pki.ca_cert.display().to_string();
    let mut args = security::every_listener_args(&cert, &key, &ca);
    args.extend_from_slice(extra);
    let broker = support::Broker::start_args(&args);
    Setup { broker, pki }
}

fn config(bootstrap: std::net::SocketAddr, settings: &[(&str, &str)]) -> ClientConfig {
    let mut c = librdkafka::config(&bootstrap.to_string());
    c.set("socket.timeout.ms", "10000")
        .set("message.timeout.ms", "20000")
        // librdkafka's own reconnect backoff, so a failed login is retried quickly.
        .set("reconnect.backoff.ms", "100");
    for (k, v) in settings {
        c.set(*k, *v);
    }
    c
}

/// Produces RECORDS records (acks=all) and reads them back from offset 0.
fn roundtrip(bootstrap: std::net::SocketAddr, settings: &[(&str, &str)], topic: &str) {
    let producer: BaseProducer<Ctx> =
        config(bootstrap, settings).set("acks", "all").create_with_context(Ctx::new("producer")).expect("producer");
    for i in 0..RECORDS {
        let value = format!("value-{i}");
        let key = format!("k-{i}");
        let record = BaseRecord::with_opaque_to(topic, i).key(&key).payload(&value);
        producer.send(record).map_err(|(e, _)| e).expect("queue a record");
        producer.poll(Duration::ZERO);
    }
    producer.flush(TIMEOUT).expect("every record delivered");
    assert_eq!(producer.in_flight_count(), 0);
    let delivered = producer.context().deliveries();
    assert_eq!(delivered.len(), RECORDS);
    assert!(
        delivered.iter().all(|(_, d)| d.is_ok()),
        "every record acknowledged: {:?}",
        delivered.iter().find(|(_, d)| d.is_err())
    );

    let consumer: BaseConsumer<Ctx> = config(bootstrap, settings)
        .set("group.id", format!("unused-{topic}"))
        .set("enable.auto.commit", "false")
        .create_with_context(Ctx::new("consumer"))
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while seen.len() < RECORDS && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("a record, not an error");
            seen.push((m.offset(), String::from_utf8(m.payload().unwrap().to_vec()).unwrap()));
        }
    }
    assert_eq!(seen.len(), RECORDS, "read back every record");
    for (i, (offset, value)) in seen.iter().enumerate() {
        assert_eq!(*offset, i as i64);
        assert_eq!(value, &format!("value-{i}"));
    }
}

/// A producer with these settings never gets a record acknowledged; returns the errors it
/// reported meanwhile.
fn refused(bootstrap: std::net::SocketAddr, settings: &[(&str, &str)], topic: &str) -> Vec<String> {
    let producer: BaseProducer<Ctx> = config(bootstrap, settings)
        .set("message.timeout.ms", "5000")
        .create_with_context(Ctx::new("refused producer"))
        .expect("producer");
    producer
        .send(BaseRecord::<str, str, usize>::with_opaque_to(topic, 0).payload("never"))
        .map_err(|(e, _)| e)
        .expect("queue");
    let _ = producer.flush(Duration::from_secs(10));
    let delivered: Vec<_> = producer.context().deliveries().into_iter().map(|(_, d)| d).collect();
    assert!(!delivered.iter().any(Result::is_ok), "a record was acknowledged: {delivered:?}");
    let mut seen = producer.context().errors();
    seen.extend(delivered.into_iter().filter_map(Result::err));
    seen
}

#[test]
fn ssl_roundtrip() {
    let _machine = crate::machine::shared();
    let s = start(&[]);
    security::create_topics(s.broker.listener("PLAINTEXT"), &["over-ssl"]);
    let ca = s.pki.ca_cert.display().to_string();
    roundtrip(
        s.broker.listener("SSL"),
        &[("security.protocol", "ssl"), ("ssl.ca.location", &ca), ("ssl.endpoint.identification.algorithm", "https")],
        "over-ssl",
    );
}

#[test]
fn sasl_ssl_scram_sha512_roundtrip_and_wrong_password() {
    let _machine = crate::machine::shared();
    let s = start(&[]);
    security::create_topics(s.broker.listener("PLAINTEXT"), &["over-sasl-ssl"]);
    security::add_user(s.broker.listener("PLAINTEXT"), "alice", "alice-secret", Mechanism::Sha512);
    let ca = s.pki.ca_cert.display().to_string();
    let good = [
        ("security.protocol", "sasl_ssl"),
        ("ssl.ca.location", ca.as_str()),
        ("sasl.mechanisms", "SCRAM-SHA-512"),
        ("sasl.username", "alice"),
        ("sasl.password", "alice-secret"),
    ];
    roundtrip(s.broker.listener("SASL_SSL"), &good, "over-sasl-ssl");

    let mut wrong = good;
    wrong[4] = ("sasl.password", "not-her-password");
    let errors = refused(s.broker.listener("SASL_SSL"), &wrong, "over-sasl-ssl");
    assert!(
        errors.iter().any(|e| e.contains("Authentication failed")),
        "librdkafka reports the failed authentication: {errors:?}"
    );
    let admin = s.broker.admin_addr.expect("admin listener");
    let failures = support::metric_sum(&support::scrape(admin), "ringbroker_sasl_authentication_failures_total", &[]);
    assert!(failures >= 1.0, "failed logins are counted: {failures}");
}

#[test]
fn sasl_ssl_scram_sha256_unknown_user_fails_like_a_wrong_password() {
    let _machine = crate::machine::shared();
    let s = start(&[]);
    security::create_topics(s.broker.listener("PLAINTEXT"), &["sha256"]);
    security::add_user(s.broker.listener("PLAINTEXT"), "bob", "bob-secret", Mechanism::Sha256);
    let ca = s.pki.ca_cert.display().to_string();
    let login = |user: &str, password: &str| {
        vec![
            ("security.protocol", "sasl_ssl".to_string()),
            ("ssl.ca.location", ca.clone()),
            ("sasl.mechanisms", "SCRAM-SHA-256".to_string()),
            ("sasl.username", user.to_string()),
            ("sasl.password", password.to_string()),
        ]
    };
    let as_refs = |v: &Vec<(&'static str, String)>| v.iter().map(|(k, v)| (*k, v.clone())).collect::<Vec<_>>();
    let good = as_refs(&login("bob", "bob-secret"));
    let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
    roundtrip(s.broker.listener("SASL_SSL"), &good, "sha256");

    // What the broker tells librdkafka, with the user name taken out, must not differ
    // between a wrong password and a user that does not exist.
    let said = |user: &str, password: &str| {
        let v = as_refs(&login(user, password));
        let v: Vec<(&str, &str)> = v.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let errors = refused(s.broker.listener("SASL_SSL"), &v, "sha256");
        let first = errors
            .iter()
            .find(|e| e.contains("Authentication failed"))
            .unwrap_or_else(|| panic!("no authentication failure reported: {errors:?}"))
            .clone();
        // Keep the broker's message: librdkafka adds the broker's address before it and the
        // connection's age after it, which differ between runs.
        let message = &first[first.find("Authentication failed").unwrap()..];
        message.split(" (after ").next().unwrap().to_string()
    };
    let wrong_password = said("bob", "wrong");
    let unknown_user = said("mallory", "wrong");
    assert_eq!(wrong_password, unknown_user);
}

#[test]
fn sasl_plaintext_plain_roundtrip_and_wrong_password() {
    let _machine = crate::machine::shared();
    let s = start(&[]);
    security::create_topics(s.broker.listener("PLAINTEXT"), &["over-plain"]);
    // PLAIN checks the password against the stored SCRAM credential.
    security::add_user(s.broker.listener("PLAINTEXT"), "carol", "carol-secret", Mechanism::Sha256);
    let good = [
        ("security.protocol", "sasl_plaintext"),
        ("sasl.mechanisms", "PLAIN"),
        ("sasl.username", "carol"),
        ("sasl.password", "carol-secret"),
    ];
    roundtrip(s.broker.listener("SASL_PLAINTEXT"), &good, "over-plain");
    let mut wrong = good;
    wrong[3] = ("sasl.password", "guess");
    let errors = refused(s.broker.listener("SASL_PLAINTEXT"), &wrong, "over-plain");
    assert!(errors.iter().any(|e| e.contains("Authentication failed")), "{errors:?}");
}

#[test]
fn mutual_tls_names_the_principal_and_refuses_untrusted_certificates() {
    let _machine = crate::machine::shared();
    // The certificate's subject is the principal: an ACL for it (and nothing else) lets it
    // produce; PLAINTEXT stays the admin listener as a super user.
    let pki_subject = "User:O=ringbroker,OU=test,CN=alice";
    let s =
        start(&["--ssl-client-auth", "required", "--authorizer-enabled", "true", "--super-users", "User:ANONYMOUS"]);
    assert_eq!(format!("User:{}", s.pki.client_principal), pki_subject);
    security::create_topics(s.broker.listener("PLAINTEXT"), &["mtls", "mtls-forbidden"]);
    allow(&s.broker, pki_subject, "mtls");
    let ca = s.pki.ca_cert.display().to_string();
    let cert = s.pki.client_cert.display().to_string();
    let key = s.pki.client_key.display().to_string();
    let with_cert = [
        ("security.protocol", "ssl"),
        ("ssl.ca.location", ca.as_str()),
        ("ssl.certificate.location", cert.as_str()),
        ("ssl.key.location", key.as_str()),
    ];
    roundtrip(s.broker.listener("SSL"), &with_cert, "mtls");
    // The same client on a topic its principal has no ACL for is refused.
    let errors = refused(s.broker.listener("SSL"), &with_cert, "mtls-forbidden");
    assert!(errors.iter().any(|e| e.contains("authorization failed")), "{errors:?}");

    // No certificate, or one from a CA the broker does not trust: the handshake fails.
    let untrusted = s.pki.issue_untrusted_client("mallory", "/CN=mallory");
    let (ucert, ukey) = (untrusted.cert.display().to_string(), untrusted.key.display().to_string());
    for settings in [
        vec![("security.protocol", "ssl"), ("ssl.ca.location", ca.as_str())],
        vec![
            ("security.protocol", "ssl"),
            ("ssl.ca.location", ca.as_str()),
            ("ssl.certificate.location", ucert.as_str()),
            ("ssl.key.location", ukey.as_str()),
        ],
    ] {
        let errors = refused(s.broker.listener("SSL"), &settings, "mtls");
        assert!(!errors.is_empty(), "librdkafka reports the refused handshake");
    }
    let admin = s.broker.admin_addr.expect("admin listener");
    let failures = support::metric_sum(&support::scrape(admin), "ringbroker_tls_handshake_failures_total", &[]);
    assert!(failures >= 2.0, "refused handshakes are counted: {failures}");
}

/// Allows `principal` to write and read `topic`, and to use the consumer group `roundtrip`
/// names after it (CreateAcls over PLAINTEXT, a super user).
fn allow(broker: &support::Broker, principal: &str, topic: &str) {
    let grant = |resource, name: &str, op| acl(Permission::Allow, principal, resource, PatternType::Literal, name, op);
    let acls = vec![
        grant(ResourceType::Topic, topic, Operation::Write),
        grant(ResourceType::Topic, topic, Operation::Read),
        grant(ResourceType::Group, &format!("unused-{topic}"), Operation::Read),
    ];
    security::create_acls(broker.listener("PLAINTEXT"), acls);
}
