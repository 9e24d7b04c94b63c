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
