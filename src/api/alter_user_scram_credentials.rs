//! AlterUserScramCredentials: needs ALTER on the cluster. Upsertions carry the salted
//! password the client computed (Kafka's admin client never sends the password itself);
//! the broker keeps only the derived StoredKey and ServerKey. One result per user.

use std::collections::{BTreeMap, HashSet};

use proto_kafka::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use proto_kafka::messages::{AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::auth::scram::{Mechanism, ScramCredential, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::controller::CredentialChange;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::AlterUserScramCredentials, 0, 0);

type Failure = (ErrorCode, String);

fn mechanism(code: i8) -> Result<Mechanism, Failure> {
    Mechanism::from_code(code)
        .ok_or_else(|| (ErrorCode::UnsupportedSaslMechanism, format!("unknown SCRAM mechanism {code}")))
}

/// What refuses a deletion and an upsertion alike: no ALTER on the cluster, an empty name,
/// or a second change of the same user, whatever the mechanisms (Kafka's rule: one change
/// per user and request).
fn shared_problem(allowed: bool, user: &str, seen: &mut HashSet<String>) -> Option<Failure> {
    if !allowed {
        return Some((ErrorCode::ClusterAuthorizationFailed, "altering credentials needs ALTER on the cluster".into()));
    }
    if user.is_empty() {
        return Some((ErrorCode::UnacceptableCredential, "the user name is empty".into()));
    }
    if !seen.insert(user.to_string()) {
        return Some((
            ErrorCode::DuplicateResource,
            "A user credential cannot be altered twice in the same request".into(),
        ));
    }
    None
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: AlterUserScramCredentialsRequest = req.decode()?;
    let mut resp = AlterUserScramCredentialsResponse::default();
    // Every user named, in order of first appearance, with its first problem if any.
    let mut users: Vec<String> = Vec::new();
    let mut problems: BTreeMap<String, Failure> = BTreeMap::new();
    let mut changes: Vec<(String, CredentialChange)> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let allowed = authz::cluster(broker, &req, Operation::Alter);
    let mut note = |user: &str, problem: Option<Failure>, users: &mut Vec<String>| {
        if !users.iter().any(|u| u == user) {
            users.push(user.to_string());
        }
        if let Some(p) = problem {
            problems.entry(user.to_string()).or_insert(p);
        }
    };
    for d in &r.deletions {
        let user = d.name.to_string();
        let problem = if let Some(p) = shared_problem(allowed, &user, &mut seen) {
            Some(p)
        } else {
            match mechanism(d.mechanism) {
                Ok(m) => {
                    changes.push((user.clone(), CredentialChange::Delete(m)));
                    None
                }
                Err(e) => Some(e),
            }
        };
        note(&user, problem, &mut users);
    }
    for u in &r.upsertions {
        let user = u.name.to_string();
        let problem = if let Some(p) = shared_problem(allowed, &user, &mut seen) {
            Some(p)
        } else if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&u.iterations) {
            Some((
                ErrorCode::UnacceptableCredential,
                format!("iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {}", u.iterations),
            ))
        } else if u.salt.is_empty() || u.salted_password.is_empty() {
            Some((ErrorCode::UnacceptableCredential, "the salt and the salted password must not be empty".into()))
        } else {
            match mechanism(u.mechanism) {
                Ok(m) => {
                    let c = ScramCredential::from_salted_password(m, &u.salt, &u.salted_password, u.iterations);
                    changes.push((user.clone(), CredentialChange::Upsert(c)));
                    None
                }
                Err(e) => Some(e),
            }
        };
        note(&user, problem, &mut users);
    }
    // A user with any problem gets none of its changes applied.
    changes.retain(|(u, _)| !problems.contains_key(u));
    let users_of_changes: Vec<String> = changes.iter().map(|(u, _)| u.clone()).collect();
    let results = if changes.is_empty() { Vec::new() } else { broker.alter_credentials(changes).await };
    for (user, result) in users_of_changes.into_iter().zip(results) {
        if let Err(e) = result {
            problems.entry(user).or_insert(e);
        }
    }
    resp.results = users
        .into_iter()
        .map(|user| {
            let mut res = AlterUserScramCredentialsResult::default();
            res.error_message = None; // Kafka's answer on success
            if let Some((code, why)) = problems.remove(&user) {
                res.error_code = code.code();
                res.error_message = Some(str_bytes(why));
            }
            res.user = str_bytes(user);
            res
        })
        .collect();
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};
    use crate::auth::scram::salted_password;

    fn upsert(user: &str, mechanism: i8, password: &str, iterations: i32) -> ScramCredentialUpsertion {
        let mut u = ScramCredentialUpsertion::default();
        u.name = str_bytes(user);
        u.mechanism = mechanism;
        u.iterations = iterations;
        u.salt = bytes::Bytes::from_static(b"some salt");
        let m = Mechanism::from_code(mechanism).unwrap_or(Mechanism::Sha256);
        u.salted_password = salted_password(m, password, b"some salt", iterations).into();
        u
    }

    fn delete(user: &str, mechanism: i8) -> ScramCredentialDeletion {
        let mut d = ScramCredentialDeletion::default();
        d.name = str_bytes(user);
        d.mechanism = mechanism;
        d
    }

    fn alter_as(
        b: &Fake,
        principal: Option<&str>,
        deletions: Vec<ScramCredentialDeletion>,
        upsertions: Vec<ScramCredentialUpsertion>,
    ) -> Vec<(String, i16)> {
        let mut req = AlterUserScramCredentialsRequest::default();
        req.deletions = deletions;
        req.upsertions = upsertions;
        let resp: AlterUserScramCredentialsResponse = b.call_as(principal, ApiKey::AlterUserScramCredentials, 0, &req);
        assert!(resp.results.iter().all(|r| (r.error_code != 0) == r.error_message.is_some()));
        resp.results.iter().map(|r| (r.user.to_string(), r.error_code)).collect()
    }

    fn alter(
        b: &Fake,
        deletions: Vec<ScramCredentialDeletion>,
        upsertions: Vec<ScramCredentialUpsertion>,
    ) -> Vec<(String, i16)> {
        alter_as(b, None, deletions, upsertions)
    }

    const SHA256: i8 = 1;
    const SHA512: i8 = 2;

    /// The user's stored (mechanism, iterations).
    fn stored(b: &Fake, user: &str) -> Vec<(Mechanism, i32)> {
        b.catalog().credentials(user).iter().map(|c| (c.mechanism, c.iterations)).collect()
    }

    #[test]
    fn an_upserted_credential_is_stored_and_checks_the_password() {
        let b = Fake::new();
        let results = alter(&b, vec![], vec![upsert("alice", SHA256, "alice-secret", 4096)]);
        assert_eq!(results, vec![("alice".into(), 0)]);
        assert_eq!(stored(&b, "alice"), vec![(Mechanism::Sha256, 4096)]);
        let credential = b.catalog().credentials("alice").remove(0);
        assert!(credential.verify_password("alice-secret"));
        assert!(!credential.verify_password("guess"));

        assert_eq!(alter(&b, vec![], vec![upsert("alice", SHA512, "other", 8192)]), vec![("alice".into(), 0)]);
        let mut both = stored(&b, "alice");
        both.sort();
        assert_eq!(both, vec![(Mechanism::Sha256, 4096), (Mechanism::Sha512, 8192)], "one credential per mechanism");
    }

    #[test]
    fn a_deletion_removes_the_credential_and_one_that_does_not_exist_is_resource_not_found() {
        let b = Fake::new();
        alter(&b, vec![], vec![upsert("alice", SHA256, "alice-secret", 4096)]);
        assert_eq!(alter(&b, vec![delete("alice", SHA256)], vec![]), vec![("alice".into(), 0)]);
        assert!(stored(&b, "alice").is_empty());
        assert_eq!(
            alter(&b, vec![delete("alice", SHA256), delete("bob", SHA512)], vec![]),
            vec![
                ("alice".into(), ErrorCode::ResourceNotFound.code()),
                ("bob".into(), ErrorCode::ResourceNotFound.code())
            ]
        );
    }

    #[test]
    fn unacceptable_upsertions_fail_their_user_alone() {
        let b = Fake::new();
        let mut no_salt = upsert("nosalt", SHA256, "pw", 4096);
        no_salt.salt = bytes::Bytes::new();
        let upsertions = vec![
            upsert("few", SHA256, "pw", MIN_ITERATIONS - 1),
            upsert("many", SHA256, "pw", MAX_ITERATIONS + 1),
            no_salt,
            upsert("", SHA256, "pw", 4096),
            upsert("unknown", 0, "pw", 4096),
            upsert("ok", SHA512, "pw", 4096),
        ];
        let unacceptable = ErrorCode::UnacceptableCredential.code();
        assert_eq!(
            alter(&b, vec![], upsertions),
            vec![
                ("few".into(), unacceptable),
                ("many".into(), unacceptable),
                ("nosalt".into(), unacceptable),
                ("".into(), unacceptable),
                ("unknown".into(), ErrorCode::UnsupportedSaslMechanism.code()),
                ("ok".into(), 0),
            ]
        );
        let catalog = b.catalog();
        assert_eq!(catalog.scram.keys().collect::<Vec<_>>(), vec!["ok"]);
    }

    #[test]
    fn a_user_altered_twice_in_one_request_gets_none_of_its_changes() {
        let b = Fake::new();
        alter(&b, vec![], vec![upsert("alice", SHA256, "old", 4096)]);
        let results = alter(
            &b,
            vec![delete("alice", SHA256)],
            vec![upsert("alice", SHA512, "new", 4096), upsert("bob", SHA256, "pw", 4096)],
        );
        assert_eq!(results, vec![("alice".into(), ErrorCode::DuplicateResource.code()), ("bob".into(), 0)]);
        assert_eq!(stored(&b, "alice"), vec![(Mechanism::Sha256, 4096)], "neither change applied");
        assert_eq!(stored(&b, "bob"), vec![(Mechanism::Sha256, 4096)]);
    }

    #[test]
    fn altering_credentials_needs_alter_on_the_cluster() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        let refused = ErrorCode::ClusterAuthorizationFailed.code();
        let results =
            alter_as(&b, Some("User:eve"), vec![delete("bob", SHA256)], vec![upsert("eve", SHA256, "pw", 4096)]);
        assert_eq!(results, vec![("bob".into(), refused), ("eve".into(), refused)]);
        assert!(b.catalog().scram.is_empty());
        b.allow("User:ops", ResourceType::Cluster, CLUSTER_NAME, Operation::Alter);
        let results = alter_as(&b, Some("User:ops"), vec![], vec![upsert("eve", SHA256, "pw", 4096)]);
        assert_eq!(results, vec![("eve".into(), 0)]);
    }
}
