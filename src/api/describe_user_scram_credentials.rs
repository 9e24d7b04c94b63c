//! DescribeUserScramCredentials: needs DESCRIBE on the cluster; lists each user's SCRAM
//! mechanisms and iteration counts (never salts or keys).

use std::collections::HashSet;

use proto_kafka::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use proto_kafka::messages::{ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse};

use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::auth::scram::ScramCredential;
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeUserScramCredentials, 0, 0);

fn described(user: &str, creds: &[ScramCredential]) -> DescribeUserScramCredentialsResult {
    let mut r = DescribeUserScramCredentialsResult::default();
    r.user = str_bytes(user.to_string());
    r.credential_infos = creds
        .iter()
        .map(|c| {
            let mut i = CredentialInfo::default();
            i.mechanism = c.mechanism.code();
            i.iterations = c.iterations;
            i
        })
        .collect();
    // By mechanism (SCRAM-SHA-256 first), as Kafka lists them, not in the order they were set.
    r.credential_infos.sort_by_key(|i| i.mechanism);
    r
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeUserScramCredentialsRequest = req.decode()?;
    let mut resp = DescribeUserScramCredentialsResponse::default();
    if !authz::cluster(broker, &req, Operation::Describe) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        resp.error_message = Some(str_bytes("describing credentials needs DESCRIBE on the cluster"));
        return req.respond(resp);
    }
    let catalog = broker.catalog();
    match r.users.filter(|u| !u.is_empty()) {
        None => resp.results = catalog.scram.iter().map(|(u, c)| described(u, c)).collect(),
        Some(users) => {
            let mut seen = HashSet::new();
            let dups: HashSet<&str> = users.iter().map(|u| u.name.as_str()).filter(|u| !seen.insert(*u)).collect();
            let mut answered = HashSet::new();
            for u in &users {
                let name = u.name.as_str();
                if !answered.insert(name) {
                    continue;
                }
                let result = if dups.contains(name) {
                    let mut r = DescribeUserScramCredentialsResult::default();
                    r.user = str_bytes(name.to_string());
                    r.error_code = ErrorCode::DuplicateResource.code();
                    r.error_message = Some(str_bytes(format!("user {name} is named more than once")));
                    r
                } else {
                    match catalog.scram.get(name) {
                        Some(c) => described(name, c),
                        None => {
                            let mut r = DescribeUserScramCredentialsResult::default();
                            r.user = str_bytes(name.to_string());
                            r.error_code = ErrorCode::ResourceNotFound.code();
                            r.error_message = Some(str_bytes(format!("user {name} has no SCRAM credential")));
                            r
                        }
                    }
                };
                resp.results.push(result);
            }
        }
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use proto_kafka::messages::describe_user_scram_credentials_request::UserName;

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};
    use crate::auth::scram::Mechanism;
    use crate::controller::CredentialChange;

    /// Stores a credential for `user` through the controller, as AlterUserScramCredentials does.
    fn set(b: &Fake, user: &str, mechanism: Mechanism, iterations: i32) {
        let c = ScramCredential::from_password(mechanism, "pw", b"salt", iterations);
        let results =
            futures_lite::future::block_on(b.alter_credentials(vec![(user.to_string(), CredentialChange::Upsert(c))]));
        assert!(results[0].is_ok());
    }

    fn describe_as(b: &Fake, principal: Option<&str>, users: Option<&[&str]>) -> DescribeUserScramCredentialsResponse {
        let mut req = DescribeUserScramCredentialsRequest::default();
        req.users = users.map(|u| {
            u.iter()
                .map(|n| {
                    let mut name = UserName::default();
                    name.name = str_bytes(*n);
                    name
                })
                .collect()
        });
        b.call_as(principal, ApiKey::DescribeUserScramCredentials, 0, &req)
    }

    /// One result: (user, error, [(mechanism, iterations)]).
    type Described = (String, i16, Vec<(i8, i32)>);

    fn results(resp: &DescribeUserScramCredentialsResponse) -> Vec<Described> {
        resp.results
            .iter()
            .map(|r| {
                let infos = r.credential_infos.iter().map(|i| (i.mechanism, i.iterations)).collect();
                (r.user.to_string(), r.error_code, infos)
            })
            .collect()
    }

    fn broker() -> Fake {
        let b = Fake::new();
        set(&b, "alice", Mechanism::Sha512, 8192);
        set(&b, "alice", Mechanism::Sha256, 4096);
        set(&b, "bob", Mechanism::Sha256, 4096);
        b
    }

    #[test]
    fn no_users_named_lists_every_user_with_its_mechanisms_in_kafkas_order() {
        let b = broker();
        let expected =
            vec![("alice".to_string(), 0, vec![(1, 4096), (2, 8192)]), ("bob".to_string(), 0, vec![(1, 4096)])];
        for users in [None, Some(&[][..])] {
            let resp = describe_as(&b, None, users);
            assert_eq!(resp.error_code, 0);
            assert_eq!(results(&resp), expected);
        }
    }

    #[test]
    fn named_users_are_answered_once_each_unknown_and_repeated_ones_with_an_error() {
        let b = broker();
        let resp = describe_as(&b, None, Some(&["bob", "carol", "alice", "alice"]));
        assert_eq!(
            results(&resp),
            vec![
                ("bob".to_string(), 0, vec![(1, 4096)]),
                ("carol".to_string(), ErrorCode::ResourceNotFound.code(), vec![]),
                ("alice".to_string(), ErrorCode::DuplicateResource.code(), vec![]),
            ]
        );
        assert!(resp.results[1].error_message.is_some() && resp.results[2].error_message.is_some());
    }

    #[test]
    fn describing_credentials_needs_describe_on_the_cluster() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        set(&b, "alice", Mechanism::Sha256, 4096);
        let resp = describe_as(&b, Some("User:eve"), None);
        assert_eq!(resp.error_code, ErrorCode::ClusterAuthorizationFailed.code());
        assert!(resp.results.is_empty(), "no user is told");
        b.allow("User:ops", ResourceType::Cluster, CLUSTER_NAME, Operation::Describe);
        let resp = describe_as(&b, Some("User:ops"), None);
        assert_eq!(results(&resp), vec![("alice".to_string(), 0, vec![(1, 4096)])]);
    }
}
