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
