//! The Apache Kafka Java client (4.x) and its `kafka-acls` tool against Ringbroker's secured
//! listeners and authorizer:
//!
//! - users made with the Java Admin API (AlterUserScramCredentials) and listed back;
//! - produce-and-read-back over SSL (with and without a client certificate), SASL_SSL with
//!   SCRAM-SHA-512 and SASL_PLAINTEXT with PLAIN; a wrong password is an authentication
//!   failure;
//! - an ACL matrix: for each resource type (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID), its key
//!   operations through real client calls, with the principal's ACLs allowing them, denying
//!   them (DENY beats an ALLOW ALL) or absent;
//! - `kafka-acls` (org.apache.kafka.tools.AclCommand) adding, listing and removing ACLs, which
//!   take effect on the client at once.

use std::path::{Path, PathBuf};

use ringbroker::auth::acl::{Operation, PatternType, Permission, ResourceType};
use ringbroker::client::Conn;
use ringbroker::protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};
use support::java;
use support::security;
use support::tls;

use crate::machine;

/// A Java client properties file for SASL with `mechanism` as `user`.
fn sasl_props(dir: &Path, name: &str, protocol: &str, mechanism: &str, user: &str, password: &str) -> PathBuf {
    let module = match mechanism {
        "PLAIN" => "org.apache.kafka.common.security.plain.PlainLoginModule",
        _ => "org.apache.kafka.common.security.scram.ScramLoginModule",
    };
    let jaas = format!("{module} required username=\"{user}\" password=\"{password}\";");
    java::write_props(
        &dir.join(name),
        &[("security.protocol", protocol), ("sasl.mechanism", mechanism), ("sasl.jaas.config", jaas.as_str())],
    )
}

/// Runs a harness subcommand and returns its stdout lines (the harness prints its results there).
fn harness(args: &[&str]) -> Vec<String> {
    let out = java::run(args);
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn java_clients_over_ssl_sasl_ssl_and_sasl_plaintext() {
    let _machine = machine::shared();
    let pki = tls::generate("/O=ringbroker/OU=test/CN=java-client");
    let (cert, key, ca) = (
        pki.server_cert.display().to_string(),
        pki.server_key.display().to_string(),
        pki.ca_cert.display().to_string(),
    );
    let mut args = security::every_listener_args(&cert, &key, &ca);
    args.extend(["--ssl-client-auth", "requested"]);
    let broker = support::Broker::start_args(&args);
    let dir = tempfile::tempdir().unwrap();
    let plaintext = broker.listener("PLAINTEXT").to_string();

    // Users through the Java Admin API; the broker stores only salted keys.
    for (user, password, mechanism) in
        [("alice", "alice-secret", "SCRAM-SHA-512"), ("bob", "bob-secret", "SCRAM-SHA-256")]
    {
        let out = harness(&[
            "scram-user",
            "--bootstrap",
            &plaintext,
            "--user",
            user,
            "--password",
            password,
            "--mechanism",
            mechanism,
        ]);
        assert_eq!(out, ["OK"], "creating {user}");
    }
    let listed = harness(&["describe-scram", "--bootstrap", &plaintext]);
    assert!(listed.contains(&"alice SCRAM-SHA-512:8192".to_string()), "{listed:?}");
    assert!(listed.contains(&"bob SCRAM-SHA-256:8192".to_string()), "{listed:?}");
    for file in ["catalog.json", "metadata.log"] {
        let text = std::fs::read_to_string(broker.data_dir.join(file)).unwrap();
        assert!(!text.contains("alice-secret"), "a password reached the broker's {file}");
    }

    let ssl = |name: &str, keystore: Option<&Path>, protocol: &str, extra: &[(&str, &str)]| {
        let mut entries = pki.java_ssl_props(keystore);
        entries.push(("security.protocol".into(), protocol.into()));
        entries.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        java::write_props(&dir.path().join(name), &entries)
    };
    let scram_jaas =
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"alice-secret\";";
    let cases: Vec<(&str, String, PathBuf)> = vec![
        ("SSL", "java-ssl".into(), ssl("ssl.properties", None, "SSL", &[])),
        ("SSL", "java-mtls".into(), ssl("mtls.properties", Some(&pki.client_pem_keystore), "SSL", &[])),
        (
            "SASL_SSL",
            "java-scram".into(),
            ssl(
                "scram.properties",
                None,
                "SASL_SSL",
                &[("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.jaas.config", scram_jaas)],
            ),
        ),
        (
            "SASL_PLAINTEXT",
            "java-plain".into(),
            sasl_props(dir.path(), "plain.properties", "SASL_PLAINTEXT", "PLAIN", "bob", "bob-secret"),
        ),
    ];
    for (listener, topic, props) in &cases {
        let addr = broker.listener(listener).to_string();
        let out = harness(&[
            "secure-roundtrip",
            "--bootstrap",
            &addr,
            "--props",
            props.to_str().unwrap(),
            "--topic",
            topic,
            "--records",
            "500",
        ]);
        assert_eq!(out, ["OK produced=500 consumed=500"], "{listener} with {}", props.display());
    }

    // Wrong passwords, with each mechanism: the client reports an authentication failure.
    for (listener, mechanism, protocol) in
        [("SASL_PLAINTEXT", "PLAIN", "SASL_PLAINTEXT"), ("SASL_SSL", "SCRAM-SHA-512", "SASL_SSL")]
    {
        let mut props = sasl_props(dir.path(), "wrong.properties", protocol, mechanism, "alice", "not-it");
        if protocol == "SASL_SSL" {
            let mut entries = pki.java_ssl_props(None);
            let jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"not-it\";"
                .to_string();
            entries.push(("security.protocol".into(), protocol.into()));
            entries.push(("sasl.mechanism".into(), mechanism.into()));
            entries.push(("sasl.jaas.config".into(), jaas));
            props = java::write_props(&dir.path().join("wrong-ssl.properties"), &entries);
        }
        let addr = broker.listener(listener).to_string();
        let out =
            harness(&["secure-roundtrip", "--bootstrap", &addr, "--props", props.to_str().unwrap(), "--topic", "x"]);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].starts_with("FAILED SaslAuthenticationException"), "{listener}/{mechanism}: {out:?}");
    }
}

/// The resources of one principal's row of the matrix, and the operations it is checked on.
fn resources(state: &str) -> Vec<(ResourceType, String, Vec<Operation>)> {
    use Operation::*;
    vec![
        (ResourceType::Topic, format!("t-{state}"), vec![Write, Read, Describe, DescribeConfigs, AlterConfigs, Delete]),
        (ResourceType::Topic, format!("new-{state}"), vec![Create]),
        (ResourceType::Group, format!("g-{state}"), vec![Read, Describe, Delete]),
        (ResourceType::Cluster, "kafka-cluster".to_string(), vec![Describe, IdempotentWrite]),
        (ResourceType::TransactionalId, format!("x-{state}"), vec![Write, Describe]),
    ]
}

#[test]
fn acl_matrix_through_the_java_client() {
    let _machine = machine::shared();
    let broker = support::Broker::start_args(&security::secured_args(true));
    let plaintext = broker.listener("PLAINTEXT").to_string();
    let sasl = broker.listener("SASL_PLAINTEXT").to_string();
    let dir = tempfile::tempdir().unwrap();
    let states = ["allow", "deny", "none"];
    for state in states {
        let out = harness(&["scram-user", "--bootstrap", &plaintext, "--user", state, "--password", "pw"]);
        assert_eq!(out, ["OK"]);
        security::create_topics(broker.listener("PLAINTEXT"), &[&format!("t-{state}"), &format!("gt-{state}")]);
    }
    // allow: exactly the operations under test. deny: ALLOW ALL (the cluster: ALLOW each),
    // then DENY each of them (DENY wins). none: no ACL for the principal, except READ on its
    // group test's topic.
    let mut creations = Vec::new();
    for state in states {
        let principal = format!("User:{state}");
        let acl = |resource, name: &str, op, permission| {
            security::acl(permission, &principal, resource, PatternType::Literal, name, op)
        };
        creations.push(acl(ResourceType::Topic, &format!("gt-{state}"), Operation::Read, Permission::Allow));
        for (resource, name, ops) in resources(state) {
            // ALLOW ALL on the cluster would also grant CREATE and DELETE on every topic, so
            // there the DENYs stand against ALLOWs of the same operations.
            if state == "deny" && resource != ResourceType::Cluster {
                creations.push(acl(resource, &name, Operation::All, Permission::Allow));
            }
            for op in ops {
                match state {
                    "allow" => creations.push(acl(resource, &name, op, Permission::Allow)),
                    "deny" => {
                        if resource == ResourceType::Cluster {
                            creations.push(acl(resource, &name, op, Permission::Allow));
                        }
                        creations.push(acl(resource, &name, op, Permission::Deny));
                    }
                    _ => {}
                }
            }
        }
    }
    security::create_acls(broker.listener("PLAINTEXT"), creations);

    // Each row runs as its own principal, three rows at once (three JVMs).
    let rows: Vec<_> = states
        .iter()
        .map(|&state| {
            let props = sasl_props(dir.path(), &format!("{state}.properties"), "SASL_PLAINTEXT", "PLAIN", state, "pw");
            let sasl = sasl.clone();
            std::thread::spawn(move || {
                let props = props.to_str().unwrap().to_string();
                let probe = |topic: &str, actions: &str| {
                    let group = format!("g-{state}");
                    let txn = format!("x-{state}");
                    let args = [
                        "acl-probe",
                        "--bootstrap",
                        &sasl,
                        "--props",
                        &props,
                        "--topic",
                        topic,
                        "--group",
                        &group,
                        "--transactional-id",
                        &txn,
                        "--action",
                        actions,
                    ];
                    let lines = harness(&args);
                    // One action prints its outcome alone; several prefix each with its name.
                    match actions.contains(',') {
                        true => lines,
                        false => lines.into_iter().map(|l| format!("{actions} {l}")).collect(),
                    }
                };
                let mut lines = probe(
                    &format!("t-{state}"),
                    "produce,idempotent-produce,consume,describe-topic,list-offsets,describe-configs,alter-configs,\
                     describe-cluster,describe-acls,init-transactions,delete-topic",
                );
                lines.extend(probe(&format!("gt-{state}"), "group-consume,describe-group,delete-group"));
                lines.extend(probe(&format!("new-{state}"), "create-topic"));
                (state, lines)
            })
        })
        .collect();

    let denied = |class: &str| format!("DENIED {class}");
    let mut failures = Vec::new();
    for row in rows {
        let (state, lines) = row.join().expect("probe thread");
        let outcome = |action: &str| -> String {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(&format!("{action} ")))
                .unwrap_or_else(|| panic!("no outcome for {action} as {state}: {lines:?}"))
                .to_string()
        };
        let expect = |action: &str, class: &str| -> (String, String) {
            let want = match state {
                "allow" if action == "init-transactions" => "not denied".to_string(),
                "allow" => "ALLOWED".to_string(),
                // Kafka answers DescribeCluster to everyone (its authorized-operations field
                // is what depends on the ACLs).
                _ if action == "describe-cluster" => "ALLOWED".to_string(),
                _ => denied(class),
            };
            (want, outcome(action))
        };
        let checks = [
            expect("produce", "TopicAuthorizationException"),
            expect("idempotent-produce", "TopicAuthorizationException"),
            expect("consume", "TopicAuthorizationException"),
            expect("describe-topic", "TopicAuthorizationException"),
            expect("list-offsets", "TopicAuthorizationException"),
            expect("describe-configs", "TopicAuthorizationException"),
            expect("alter-configs", "TopicAuthorizationException"),
            expect("delete-topic", "TopicAuthorizationException"),
            expect("create-topic", "TopicAuthorizationException"),
            expect("describe-cluster", "ClusterAuthorizationException"),
            expect("describe-acls", "ClusterAuthorizationException"),
            expect("init-transactions", "TransactionalIdAuthorizationException"),
            expect("group-consume", "GroupAuthorizationException"),
            expect("describe-group", "GroupAuthorizationException"),
            expect("delete-group", "GroupAuthorizationException"),
        ];
        for (action, (want, got)) in [
            "produce",
            "idempotent-produce",
            "consume",
            "describe-topic",
            "list-offsets",
            "describe-configs",
            "alter-configs",
            "delete-topic",
            "create-topic",
            "describe-cluster",
            "describe-acls",
            "init-transactions",
            "group-consume",
            "describe-group",
            "delete-group",
        ]
        .iter()
        .zip(checks)
        {
            // Transactions are not served: allowed, InitProducerId still fails, but not as denied.
            let ok = if want == "not denied" { !got.starts_with("DENIED") } else { got == want };
            if !ok {
                failures.push(format!("{state}/{action}: wanted {want}, got {got}"));
            }
        }
    }
    assert!(failures.is_empty(), "ACL matrix mismatches:\n{}", failures.join("\n"));
}

/// The ACLs the broker holds, as `TYPE NAME PATTERN PRINCIPAL OPERATION PERMISSION` lines.
fn broker_acls(broker: &support::Broker) -> Vec<String> {
    let mut conn = Conn::connect(broker.listener("PLAINTEXT")).expect("connect to PLAINTEXT");
    let mut req = DescribeAclsRequest::default();
    // Everything: ANY codes and no name, principal or host (the codec's defaults are "").
    req.resource_name_filter = None;
    req.principal_filter = None;
    req.host_filter = None;
    req.resource_type_filter = 1; // ANY
    req.pattern_type_filter = 1;
    req.operation = 1;
    req.permission_type = 1;
    let resp: DescribeAclsResponse = conn.call(ApiKey::DescribeAcls, 3, &req).expect("DescribeAcls");
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let mut out = Vec::new();
    for r in &resp.resources {
        for a in &r.acls {
            out.push(format!(
                "{} {} {} {} {} {}",
                ResourceType::from_code(r.resource_type).map_or("?", |t| t.name()),
                r.resource_name.as_str(),
                PatternType::from_code(r.pattern_type).map_or("?", |p| p.name()),
                a.principal.as_str(),
                Operation::from_code(a.operation).map_or("?", |o| o.name()),
                Permission::from_code(a.permission_type).map_or("?", |p| p.name()),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn kafka_acls_tool_adds_lists_and_removes_acls() {
    let _machine = machine::shared();
    let broker = support::Broker::start_args(&security::secured_args(true));
    let plaintext = broker.listener("PLAINTEXT").to_string();
    let sasl = broker.listener("SASL_PLAINTEXT").to_string();
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(harness(&["scram-user", "--bootstrap", &plaintext, "--user", "dana", "--password", "pw"]), ["OK"]);
    security::create_topics(broker.listener("PLAINTEXT"), &["reports-2026", "other"]);
    let dana = sasl_props(dir.path(), "dana.properties", "SASL_PLAINTEXT", "PLAIN", "dana", "pw");
    let dana = dana.to_str().unwrap();
    let probe = |topic: &str| {
        harness(&["acl-probe", "--bootstrap", &sasl, "--props", dana, "--topic", topic, "--action", "consume"])
    };
    assert_eq!(probe("reports-2026"), ["DENIED TopicAuthorizationException"]);

    let acls = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", plaintext.as_str()];
        all.extend_from_slice(args);
        let out = java::tool("org.apache.kafka.tools.AclCommand", &all).output().expect("run kafka-acls");
        java::print_output("kafka-acls", &out);
        assert!(out.status.success(), "kafka-acls {args:?} failed:\n{}", java::tail(&out, 30));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    acls(&[
        "--add",
        "--allow-principal",
        "User:dana",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "reports-",
        "--resource-pattern-type",
        "prefixed",
    ]);
    acls(&["--add", "--deny-principal", "User:dana", "--operation", "Read", "--topic", "other"]);
    assert_eq!(
        broker_acls(&broker),
        [
            "TOPIC other LITERAL User:dana READ DENY",
            "TOPIC reports- PREFIXED User:dana DESCRIBE ALLOW",
            "TOPIC reports- PREFIXED User:dana READ ALLOW",
        ]
    );
    let listed = acls(&["--list", "--topic", "reports-", "--resource-pattern-type", "prefixed"]);
    assert!(listed.contains("User:dana") && listed.contains("READ") && listed.contains("DESCRIBE"), "{listed}");
    // The prefixed ALLOW applies at once, to a topic it names by prefix only.
    assert_eq!(probe("reports-2026"), ["ALLOWED"]);
    assert_eq!(probe("other"), ["DENIED TopicAuthorizationException"]);

    acls(&["--remove", "--force", "--topic", "reports-", "--resource-pattern-type", "prefixed"]);
    assert_eq!(broker_acls(&broker), ["TOPIC other LITERAL User:dana READ DENY"]);
    assert_eq!(probe("reports-2026"), ["DENIED TopicAuthorizationException"]);
}
