//! The security admin commands (`ringbroker user|acl`) run as a process against a real broker
//! with a PLAINTEXT listener for the CLI (its anonymous principal a super user) and a
//! SASL_PLAINTEXT listener for logins:
//!
//! - users: `set` stores a credential that `list` shows with its mechanism and iterations, a
//!   second mechanism is kept beside the first, `delete --mechanism` removes only that one,
//!   `delete` without it removes the user; an unknown user is RESOURCE_NOT_FOUND, exit 1;
//! - a user set by the CLI, with --password or --password-stdin, logs in with SASL PLAIN on
//!   the SASL listener, and a wrong password is refused (SASL_AUTHENTICATION_FAILED, 58);
//! - ACLs: create (allow and deny, literal and prefixed), list with filters (including the
//!   MATCH pattern filter), delete what a filter matches and print it; a delete without any
//!   filter is refused unless --all;
//! - every JSON output parses and carries the fields; bad usage exits 2;
//! - against a broker without an authorizer, `acl` commands fail with SECURITY_DISABLED.

use std::net::SocketAddr;

use ringbroker::protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use ringbroker::protocol::ErrorCode;
use support::client;
use support::security;
use support::Broker;

use crate::cli_run::{failure, json_of, run, run_with_input, stdout_of};

fn secured_broker() -> Broker {
    Broker::start_args(&security::secured_args(true))
}

/// The rows of a table under its header, each split into cells.
fn rows(text: &str, header: &[&str]) -> Vec<Vec<String>> {
    let mut lines = text.lines();
    let first: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(first, header, "{text}");
    lines.map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

/// `user list` as (user, mechanism, iterations) rows.
fn user_rows(admin: SocketAddr, users: &[&str]) -> Vec<(String, String, i32)> {
    let args: Vec<&str> = ["user", "list"].into_iter().chain(users.iter().copied()).collect();
    let text = stdout_of(&run(admin, &args), "user list");
    rows(&text, &["USER", "MECHANISM", "ITERATIONS"])
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].parse().expect("iterations")))
        .collect()
}

/// SaslHandshake v1 PLAIN, then SaslAuthenticate v2 with `\0user\0password`: the error code
/// and message of the authentication.
fn plain_login(addr: SocketAddr, user: &str, password: &str) -> (i16, Option<String>) {
    let mut c = client::Client::connect(addr);
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &security::plain_handshake());
    assert_eq!(r.error_code, 0, "PLAIN refused; the broker offers {:?}", r.mechanisms);
    let r: SaslAuthenticateResponse =
        c.call(ApiKey::SaslAuthenticate, 2, &security::plain_authenticate(user, password));
    (r.error_code, r.error_message.map(|m| m.to_string()))
}

fn assert_logs_in(addr: SocketAddr, user: &str, password: &str) {
    let (code, message) = plain_login(addr, user, password);
    assert_eq!(code, 0, "{user} cannot log in: {message:?}");
}

#[test]
fn users_are_set_listed_and_deleted() {
    let b = secured_broker();
    let admin = b.listener("PLAINTEXT");
    let set = json_of(&run(admin, &["user", "set", "alice", "--password", "pw-512", "--format", "json"]), "user set");
    assert_eq!(set["user"], "alice");
    assert_eq!(set["mechanism"], "SCRAM-SHA-512", "the default mechanism");
    assert_eq!(set["iterations"], 4096, "the default iterations");
    assert_eq!(user_rows(admin, &[]), [("alice".into(), "SCRAM-SHA-512".into(), 4096)]);

    let text = stdout_of(
        &run(
            admin,
            &["user", "set", "alice", "--password", "pw-256", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192"],
        ),
        "user set",
    );
    assert_eq!(
        rows(&text, &["USER", "MECHANISM", "ITERATIONS", "STATUS"]),
        [["alice", "SCRAM-SHA-256", "8192", "set"]]
    );
    stdout_of(&run(admin, &["user", "set", "bob", "--password", "pw-bob"]), "user set bob");
    assert_eq!(
        user_rows(admin, &["alice"]),
        [("alice".into(), "SCRAM-SHA-256".into(), 8192), ("alice".into(), "SCRAM-SHA-512".into(), 4096)],
        "a second mechanism is kept beside the first"
    );

    let listed = json_of(&run(admin, &["user", "list", "--format", "json"]), "user list");
    let users: Vec<&str> = listed.as_array().unwrap().iter().map(|u| u["user"].as_str().unwrap()).collect();
    assert_eq!(users, ["alice", "bob"], "{listed}");
    let alice = &listed[0]["credentials"];
    assert_eq!(alice[0]["mechanism"], "SCRAM-SHA-256", "{listed}");
    assert_eq!(alice[0]["iterations"], 8192, "{listed}");
    assert_eq!(alice[1]["mechanism"], "SCRAM-SHA-512", "{listed}");
    assert_eq!(alice[1]["iterations"], 4096, "{listed}");
    assert!(!listed.to_string().contains("salt"), "no salts or keys are shown: {listed}");

    let deleted = json_of(
        &run(admin, &["user", "delete", "alice", "--mechanism", "SCRAM-SHA-512", "--format", "json"]),
        "user delete --mechanism",
    );
    assert_eq!(deleted["user"], "alice");
    assert_eq!(deleted["deleted"], serde_json::json!(["SCRAM-SHA-512"]));
    assert_eq!(user_rows(admin, &["alice"]), [("alice".into(), "SCRAM-SHA-256".into(), 8192)]);

    // Without --mechanism: every credential, so the user is gone.
    let text = stdout_of(&run(admin, &["user", "delete", "alice"]), "user delete");
    assert_eq!(rows(&text, &["USER", "MECHANISM", "STATUS"]), [["alice", "SCRAM-SHA-256", "deleted"]]);
    assert_eq!(user_rows(admin, &[]), [("bob".into(), "SCRAM-SHA-512".into(), 4096)]);

    let unknown = run(admin, &["user", "list", "alice"]);
    let err = failure(&unknown, 1);
    assert!(err.contains("RESOURCE_NOT_FOUND (91)") && err.contains("'alice'"), "{err}");
    // The users that exist are still shown beside the one that does not.
    let mixed = run(admin, &["user", "list", "bob", "nobody"]);
    assert!(failure(&mixed, 1).contains("'nobody'"));
    assert!(String::from_utf8_lossy(&mixed.stdout).contains("bob"));
    let err = failure(&run(admin, &["user", "delete", "nobody"]), 1);
    assert!(err.contains("RESOURCE_NOT_FOUND (91)"), "{err}");
}

#[test]
fn users_set_by_the_cli_log_in_with_their_password_only() {
    let b = secured_broker();
    let admin = b.listener("PLAINTEXT");
    let sasl = b.listener("SASL_PLAINTEXT");
    // A user nobody set cannot log in.
    assert_eq!(plain_login(sasl, "carol", "from-stdin").0, ErrorCode::SaslAuthenticationFailed.code());

    let out = run_with_input(admin, &["user", "set", "carol", "--password-stdin"], b"from-stdin\nnot-the-password\n");
    stdout_of(&out, "user set --password-stdin");
    assert_logs_in(sasl, "carol", "from-stdin");
    let (code, message) = plain_login(sasl, "carol", "not-the-password");
    assert_eq!(
        code,
        ErrorCode::SaslAuthenticationFailed.code(),
        "only the first line of stdin is the password: {message:?}"
    );
    assert_eq!(
        plain_login(sasl, "carol", "from-stdin\n").0,
        ErrorCode::SaslAuthenticationFailed.code(),
        "the line ending is not part of it"
    );

    stdout_of(
        &run(
            admin,
            &["user", "set", "dave", "--password", "d4ve!", "--mechanism", "scram-sha-256", "--iterations", "5000"],
        ),
        "user set --password",
    );
    assert_logs_in(sasl, "dave", "d4ve!");
    assert_eq!(plain_login(sasl, "dave", "d4ve?").0, ErrorCode::SaslAuthenticationFailed.code());

    // A new password replaces the old one.
    stdout_of(&run(admin, &["user", "set", "dave", "--password", "n3w", "--mechanism", "SCRAM-SHA-256"]), "user set");
    assert_logs_in(sasl, "dave", "n3w");
    assert_eq!(plain_login(sasl, "dave", "d4ve!").0, ErrorCode::SaslAuthenticationFailed.code());

    stdout_of(&run(admin, &["user", "delete", "dave"]), "user delete");
    assert_eq!(
        plain_login(sasl, "dave", "n3w").0,
        ErrorCode::SaslAuthenticationFailed.code(),
        "a deleted user cannot log in"
    );

    let err = failure(&run_with_input(admin, &["user", "set", "erin", "--password-stdin"], b""), 1);
    assert!(err.contains("empty password"), "{err}");
    let err = failure(&run(admin, &["user", "list", "erin"]), 1);
    assert!(err.contains("RESOURCE_NOT_FOUND (91)"), "nothing was stored for erin: {err}");
}

const ACL_HEADER: [&str; 7] = ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"];

/// `acl list ARGS` as table rows.
fn acl_rows(admin: SocketAddr, filter: &[&str]) -> Vec<Vec<String>> {
    let args: Vec<&str> = ["acl", "list"].into_iter().chain(filter.iter().copied()).collect();
    rows(&stdout_of(&run(admin, &args), "acl list"), &ACL_HEADER)
}

fn row(cells: [&str; 7]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

#[test]
fn acls_are_created_listed_and_deleted() {
    let b = secured_broker();
    let admin = b.listener("PLAINTEXT");
    let created = run(
        admin,
        &[
            "acl",
            "create",
            "--allow-principal",
            "User:alice",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--operation",
            "DESCRIBE",
            "--topic",
            "orders",
        ],
    );
    let text = stdout_of(&created, "acl create");
    assert_eq!(rows(&text, &ACL_HEADER).len(), 4, "2 principals x 2 operations: {text}");
    let created = json_of(
        &run(
            admin,
            &[
                "acl",
                "create",
                "--deny-principal",
                "User:mallory",
                "--operation",
                "all",
                "--topic",
                "orders-",
                "--resource-pattern-type",
                "prefixed",
                "--host",
                "10.0.0.5",
                "--format",
                "json",
            ],
        ),
        "acl create --format json",
    );
    assert_eq!(
        created,
        serde_json::json!({"created": [{
            "resource_type": "TOPIC", "resource_name": "orders-", "pattern_type": "PREFIXED",
            "principal": "User:mallory", "host": "10.0.0.5", "operation": "ALL", "permission": "DENY",
        }]})
    );
    stdout_of(
        &run(admin, &["acl", "create", "--allow-principal", "User:*", "--operation", "IDEMPOTENT_WRITE", "--cluster"]),
        "acl create --cluster",
    );
    stdout_of(
        &run(admin, &["acl", "create", "--allow-principal", "User:alice", "--operation", "Read", "--group", "billing"]),
        "acl create --group",
    );

    let all = acl_rows(admin, &[]);
    assert_eq!(
        all,
        [
            row(["CLUSTER", "kafka-cluster", "LITERAL", "User:*", "*", "IDEMPOTENT_WRITE", "ALLOW"]),
            row(["GROUP", "billing", "LITERAL", "User:alice", "*", "READ", "ALLOW"]),
            row(["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"]),
            row(["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"]),
            row(["TOPIC", "orders", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"]),
            row(["TOPIC", "orders", "LITERAL", "User:bob", "*", "READ", "ALLOW"]),
            row(["TOPIC", "orders-", "PREFIXED", "User:mallory", "10.0.0.5", "ALL", "DENY"]),
        ]
    );
    // Filters: a name matches only that name; MATCH finds what applies to a resource.
    assert_eq!(acl_rows(admin, &["--topic", "orders-"]).len(), 1);
    assert_eq!(acl_rows(admin, &["--topic", "orders-eu", "--resource-pattern-type", "match"]).len(), 1);
    assert_eq!(acl_rows(admin, &["--topic", "orders", "--resource-pattern-type", "prefixed"]).len(), 0);
    assert_eq!(acl_rows(admin, &["--principal", "User:alice", "--operation", "read"]).len(), 2);
    assert_eq!(acl_rows(admin, &["--permission", "deny"])[0][3], "User:mallory");
    assert_eq!(acl_rows(admin, &["--cluster"])[0][5], "IDEMPOTENT_WRITE");

    let listed =
        json_of(&run(admin, &["acl", "list", "--topic", "orders", "--format", "json"]), "acl list --format json");
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 4);
    for a in listed {
        assert_eq!(a["resource_type"], "TOPIC", "{a}");
        assert_eq!(a["resource_name"], "orders", "{a}");
        assert_eq!(a["pattern_type"], "LITERAL", "{a}");
        assert_eq!(a["host"], "*", "{a}");
        assert_eq!(a["permission"], "ALLOW", "{a}");
        assert!(["User:alice", "User:bob"].contains(&a["principal"].as_str().unwrap()), "{a}");
        assert!(["READ", "DESCRIBE"].contains(&a["operation"].as_str().unwrap()), "{a}");
    }

    // Deleting needs a filter, or --all.
    let err = failure(&run(admin, &["acl", "delete"]), 1);
    assert!(err.contains("--all"), "{err}");
    let err = failure(&run(admin, &["acl", "delete", "--resource-pattern-type", "match"]), 1);
    assert!(err.contains("refusing"), "{err}");
    assert_eq!(acl_rows(admin, &[]).len(), 7, "a refused delete deletes nothing");

    let text = stdout_of(&run(admin, &["acl", "delete", "--topic", "orders", "--principal", "User:bob"]), "acl delete");
    assert_eq!(
        rows(&text, &ACL_HEADER),
        [
            row(["TOPIC", "orders", "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"]),
            row(["TOPIC", "orders", "LITERAL", "User:bob", "*", "READ", "ALLOW"]),
        ]
    );
    let deleted = json_of(
        &run(
            admin,
            &["acl", "delete", "--topic", "orders-", "--resource-pattern-type", "prefixed", "--format", "json"],
        ),
        "acl delete --format json",
    );
    assert_eq!(deleted["deleted"].as_array().unwrap().len(), 1, "{deleted}");
    assert_eq!(deleted["deleted"][0]["principal"], "User:mallory", "{deleted}");
    assert_eq!(deleted["deleted"][0]["pattern_type"], "PREFIXED", "{deleted}");
    let nothing = run(admin, &["acl", "delete", "--topic", "orders-", "--format", "json"]);
    assert_eq!(json_of(&nothing, "acl delete of nothing"), serde_json::json!({"deleted": []}));
    assert_eq!(acl_rows(admin, &[]).len(), 4);

    let deleted = json_of(&run(admin, &["acl", "delete", "--all", "--format", "json"]), "acl delete --all");
    assert_eq!(deleted["deleted"].as_array().unwrap().len(), 4, "{deleted}");
    assert!(acl_rows(admin, &[]).is_empty());
}

#[test]
fn bad_acls_and_bad_usage_are_refused() {
    let b = secured_broker();
    let admin = b.listener("PLAINTEXT");
    // Refused by the CLI before sending: the ACL could never apply.
    let err = failure(
        &run(
            admin,
            &["acl", "create", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"],
        ),
        1,
    );
    assert!(err.contains("IDEMPOTENT_WRITE") && err.contains("TOPIC"), "{err}");
    // Refused by the broker, named with its code.
    let err = failure(
        &run(admin, &["acl", "create", "--allow-principal", "alice", "--operation", "Read", "--topic", "t"]),
        1,
    );
    assert!(err.contains("INVALID_REQUEST (42)") && err.contains("User:"), "{err}");
    assert!(acl_rows(admin, &[]).is_empty());

    for args in [
        &["acl", "create", "--operation", "Read", "--topic", "t"][..],
        &["acl", "create", "--allow-principal", "User:a", "--topic", "t"],
        &["acl", "create", "--allow-principal", "User:a", "--operation", "Read"],
        &["acl", "create", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t", "--cluster"],
        &["acl", "create", "--allow-principal", "User:a", "--operation", "Reed", "--topic", "t"],
        &["acl", "delete", "--all", "--topic", "t"],
        &["user", "set", "alice"],
        &["user", "set", "alice", "--password", "p", "--password-stdin"],
        &["user", "set", "alice", "--password", "p", "--mechanism", "SCRAM-SHA-1"],
        &["user", "set", "alice", "--password", "p", "--iterations", "100"],
    ] {
        failure(&run(admin, args), 2);
    }
    assert!(user_rows(admin, &[]).is_empty(), "no bad usage stored anything");
}

#[test]
fn acl_commands_say_when_the_broker_has_no_authorizer() {
    let b = Broker::start_args(&["--listeners", "PLAINTEXT://127.0.0.1:0"]);
    let admin = b.listener("PLAINTEXT");
    let create = ["acl", "create", "--allow-principal", "User:a", "--deny-principal", "User:b", "--operation", "Read"];
    let create: Vec<&str> = create.into_iter().chain(["--topic", "t"]).collect();
    let err = failure(&run(admin, &create), 1);
    assert!(err.contains("SECURITY_DISABLED (54)"), "{err}");
    assert!(err.contains("authorizer"), "the message says why: {err}");
    assert_eq!(err.lines().count(), 1, "one refusal, not one per ACL: {err}");
    let err = failure(&run(admin, &["acl", "list"]), 1);
    assert!(err.contains("SECURITY_DISABLED (54)") && err.contains("authorizer"), "{err}");
    let err = failure(&run(admin, &["acl", "delete", "--all"]), 1);
    assert!(err.contains("SECURITY_DISABLED (54)"), "{err}");
}
