//! Cases of the security APIs: SaslHandshake and SaslAuthenticate on a SASL_PLAINTEXT
//! listener (the v0 handshake followed by the legacy bare tokens included), the ACL APIs
//! without an authorizer (SECURITY_DISABLED) and with one (as a super user), and the SCRAM
//! credential APIs.

use ringbroker::auth::acl::{Operation, PatternType, Permission, ResourceType};
use ringbroker::auth::scram::{self, Mechanism};
use ringbroker::protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use ringbroker::protocol::messages::create_acls_request::AclCreation;
use ringbroker::protocol::messages::delete_acls_request::DeleteAclsFilter;
use ringbroker::protocol::messages::describe_user_scram_credentials_request::UserName;
use ringbroker::protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, CreateAclsRequest, CreateAclsResponse,
    DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use ringbroker::protocol::ErrorCode;

use super::fixture::{sbs, Ctx};
use super::skip;
use super::wire::{expect_code, expect_code_msg, Check, Wire};

// ---- SASL --------------------------------------------------------------------------------

fn plain_token(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

fn handshake(w: &mut Wire, v: i16, mechanism: &str) -> Result<SaslHandshakeResponse, String> {
    let mut req = SaslHandshakeRequest::default();
    req.mechanism = sbs(mechanism);
    w.call(ApiKey::SaslHandshake, v, &req)
}

fn authenticate(w: &mut Wire, v: i16, token: Vec<u8>) -> Result<SaslAuthenticateResponse, String> {
    let mut req = SaslAuthenticateRequest::default();
    req.auth_bytes = token.into();
    w.call(ApiKey::SaslAuthenticate, v, &req)
}

/// An authenticated connection is served.
fn served(w: &mut Wire) -> Check {
    let r: MetadataResponse = w.call(ApiKey::Metadata, 12, &MetadataRequest::default())?;
    ensure!(!r.brokers.is_empty(), "Metadata after authenticating lists no broker");
    Ok(())
}

/// PLAIN is offered and accepted: at v0 the token then goes bare (size-prefixed, answered
/// the same way), from v1 in SaslAuthenticate. An unknown mechanism is
/// UNSUPPORTED_SASL_MECHANISM with the enabled list.
pub(crate) fn sasl_handshake(ctx: &Ctx, v: i16) -> Check {
    let Some(sasl) = &ctx.t.sasl else { return Err(skip("no SASL listener to sweep")) };
    let mut w = Wire::connect(sasl.addr)?;
    let r = handshake(&mut w, v, "PLAIN")?;
    expect_code("SaslHandshake PLAIN", r.error_code, 0)?;
    ensure!(r.mechanisms.iter().any(|m| m.as_str() == "PLAIN"), "mechanisms {:?}", r.mechanisms);
    let token = plain_token(&sasl.user, &sasl.password);
    if v == 0 {
        let mut frame = (token.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&token);
        w.write_raw(&frame)?;
        let reply = w.read_frame()?.ok_or("the connection closed after the legacy PLAIN token")?;
        ensure!(reply.is_empty(), "PLAIN's legacy answer is {} bytes, not an empty token", reply.len());
    } else {
        let a = authenticate(&mut w, 2, token)?;
        expect_code_msg("SaslAuthenticate v2 after the handshake", a.error_code, 0, &a.error_message)?;
    }
    served(&mut w)?;

    let mut w = Wire::connect(sasl.addr)?;
    let r = handshake(&mut w, v, "NO-SUCH-MECHANISM")?;
    expect_code("SaslHandshake of an unknown mechanism", r.error_code, ErrorCode::UnsupportedSaslMechanism.code())?;
    ensure!(r.mechanisms.iter().any(|m| m.as_str() == "PLAIN"), "mechanisms {:?}", r.mechanisms);
    Ok(())
}

/// PLAIN with the right password authenticates (no session lifetime is configured); a wrong
/// password is SASL_AUTHENTICATION_FAILED with a message.
pub(crate) fn sasl_authenticate(ctx: &Ctx, v: i16) -> Check {
    let Some(sasl) = &ctx.t.sasl else { return Err(skip("no SASL listener to sweep")) };
    let mut w = Wire::connect(sasl.addr)?;
    expect_code("SaslHandshake v1", handshake(&mut w, 1, "PLAIN")?.error_code, 0)?;
    let a = authenticate(&mut w, v, plain_token(&sasl.user, &sasl.password))?;
    expect_code_msg("SaslAuthenticate", a.error_code, 0, &a.error_message)?;
    ensure!(a.auth_bytes.is_empty(), "PLAIN answered {} bytes", a.auth_bytes.len());
    if v >= 1 {
        ensure!(a.session_lifetime_ms == 0, "session lifetime {} without re-authentication", a.session_lifetime_ms);
    }
    served(&mut w)?;

    let mut w = Wire::connect(sasl.addr)?;
    expect_code("SaslHandshake v1", handshake(&mut w, 1, "PLAIN")?.error_code, 0)?;
    let a = authenticate(&mut w, v, plain_token(&sasl.user, "not-the-password"))?;
    expect_code("SaslAuthenticate with a wrong password", a.error_code, ErrorCode::SaslAuthenticationFailed.code())?;
    ensure!(a.error_message.as_ref().is_some_and(|m| !m.is_empty()), "a failed authentication without a message");
    Ok(())
}

// ---- ACLs --------------------------------------------------------------------------------

/// ALLOW `principal` to READ the topic `topic` from any host.
fn creation(principal: &str, topic: &str) -> AclCreation {
    let mut a = AclCreation::default();
    a.resource_type = ResourceType::Topic.code();
    a.resource_name = sbs(topic);
    a.resource_pattern_type = PatternType::Literal.code();
    a.principal = sbs(principal);
    a.host = sbs("*");
    a.operation = Operation::Read.code();
    a.permission_type = Permission::Allow.code();
    a
}

const ANY: i8 = 1;

fn describe_filter(principal: &str) -> DescribeAclsRequest {
    let mut f = DescribeAclsRequest::default();
    f.resource_type_filter = ANY;
    f.resource_name_filter = None;
    f.pattern_type_filter = ANY;
    f.principal_filter = Some(sbs(principal));
    f.host_filter = None;
    f.operation = ANY;
    f.permission_type = ANY;
    f
}

fn delete_filter(principal: &str) -> DeleteAclsFilter {
    let mut f = DeleteAclsFilter::default();
    f.resource_type_filter = ANY;
    f.resource_name_filter = None;
    f.pattern_type_filter = ANY;
    f.principal_filter = Some(sbs(principal));
    f.host_filter = None;
    f.operation = ANY;
    f.permission_type = ANY;
    f
}

fn create_acls_at(w: &mut Wire, v: i16, principal: &str, topic: &str) -> Result<CreateAclsResponse, String> {
    let mut req = CreateAclsRequest::default();
    req.creations = vec![creation(principal, topic)];
    w.call(ApiKey::CreateAcls, v, &req)
}

/// The topics of the ACLs DescribeAcls `v` shows for `principal`.
fn described(w: &mut Wire, v: i16, principal: &str) -> Result<Vec<String>, String> {
    let r: DescribeAclsResponse = w.call(ApiKey::DescribeAcls, v, &describe_filter(principal))?;
    expect_code_msg("DescribeAcls", r.error_code, 0, &r.error_message)?;
    let mut topics = Vec::new();
    for res in &r.resources {
        for a in &res.acls {
            ensure!(
                res.resource_type == ResourceType::Topic.code()
                    && res.pattern_type == PatternType::Literal.code()
                    && a.principal.as_str() == principal
                    && a.host.as_str() == "*"
                    && a.operation == Operation::Read.code()
                    && a.permission_type == Permission::Allow.code(),
                "DescribeAcls shows {res:?}"
            );
            topics.push(res.resource_name.to_string());
        }
    }
    Ok(topics)
}

fn delete_acls_at(w: &mut Wire, v: i16, principal: &str) -> Result<DeleteAclsResponse, String> {
    let mut req = DeleteAclsRequest::default();
    req.filters = vec![delete_filter(principal)];
    w.call(ApiKey::DeleteAcls, v, &req)
}

/// Whether there is anything to sweep: a broker without an authorizer, or one with.
fn acl_targets(ctx: &Ctx) -> Check {
    if ctx.t.plain_has_authorizer && ctx.t.authz.is_none() {
        return Err(skip("no broker to sweep the ACL APIs on"));
    }
    Ok(())
}

/// Without an authorizer SECURITY_DISABLED; with one the ACL is stored and shows in
/// DescribeAcls.
pub(crate) fn create_acls(ctx: &Ctx, v: i16) -> Check {
    acl_targets(ctx)?;
    let principal = format!("User:{}", ctx.name("acl-create", v));
    let topic = ctx.name("acl-topic", v);
    if !ctx.t.plain_has_authorizer {
        let r = create_acls_at(&mut ctx.plain()?, v, &principal, &topic)?;
        ensure!(r.results.len() == 1, "{} results for one creation", r.results.len());
        expect_code("CreateAcls without an authorizer", r.results[0].error_code, ErrorCode::SecurityDisabled.code())?;
    }
    let Some(authz) = ctx.t.authz else { return Ok(()) };
    let mut w = Wire::connect(authz)?;
    let r = create_acls_at(&mut w, v, &principal, &topic)?;
    ensure!(r.results.len() == 1, "{} results for one creation", r.results.len());
    expect_code_msg("CreateAcls", r.results[0].error_code, 0, &r.results[0].error_message)?;
    ctx.eventually(|| {
        let topics = described(&mut w, 3, &principal)?;
        ensure!(topics == [topic.clone()], "DescribeAcls v3 shows {topics:?} after CreateAcls");
        Ok(())
    })?;
    expect_code("DeleteAcls v3", delete_acls_at(&mut w, 3, &principal)?.filter_results[0].error_code, 0)
}

pub(crate) fn describe_acls(ctx: &Ctx, v: i16) -> Check {
    acl_targets(ctx)?;
    let principal = format!("User:{}", ctx.name("acl-describe", v));
    let topic = ctx.name("acl-topic", v);
    if !ctx.t.plain_has_authorizer {
        let r: DescribeAclsResponse = ctx.plain()?.call(ApiKey::DescribeAcls, v, &describe_filter(&principal))?;
        expect_code("DescribeAcls without an authorizer", r.error_code, ErrorCode::SecurityDisabled.code())?;
    }
    let Some(authz) = ctx.t.authz else { return Ok(()) };
    let mut w = Wire::connect(authz)?;
    let r = create_acls_at(&mut w, 3, &principal, &topic)?;
    expect_code_msg("CreateAcls v3", r.results[0].error_code, 0, &r.results[0].error_message)?;
    ctx.eventually(|| {
        let topics = described(&mut w, v, &principal)?;
        ensure!(topics == [topic.clone()], "DescribeAcls shows {topics:?} after CreateAcls");
        Ok(())
    })?;
    expect_code("DeleteAcls v3", delete_acls_at(&mut w, 3, &principal)?.filter_results[0].error_code, 0)
}

/// Without an authorizer SECURITY_DISABLED; with one the filter's ACLs are deleted and
/// answered.
pub(crate) fn delete_acls(ctx: &Ctx, v: i16) -> Check {
    acl_targets(ctx)?;
    let principal = format!("User:{}", ctx.name("acl-delete", v));
    let topic = ctx.name("acl-topic", v);
    if !ctx.t.plain_has_authorizer {
        let r = delete_acls_at(&mut ctx.plain()?, v, &principal)?;
        ensure!(r.filter_results.len() == 1, "{} results for one filter", r.filter_results.len());
        expect_code(
            "DeleteAcls without an authorizer",
            r.filter_results[0].error_code,
            ErrorCode::SecurityDisabled.code(),
        )?;
    }
    let Some(authz) = ctx.t.authz else { return Ok(()) };
    let mut w = Wire::connect(authz)?;
    let r = create_acls_at(&mut w, 3, &principal, &topic)?;
    expect_code_msg("CreateAcls v3", r.results[0].error_code, 0, &r.results[0].error_message)?;
    ctx.eventually(|| {
        let topics = described(&mut w, 3, &principal)?;
        ensure!(topics == [topic.clone()], "DescribeAcls v3 shows {topics:?} after CreateAcls");
        Ok(())
    })?;
    let r = delete_acls_at(&mut w, v, &principal)?;
    ensure!(r.filter_results.len() == 1, "{} results for one filter", r.filter_results.len());
    let f = &r.filter_results[0];
    expect_code_msg("DeleteAcls", f.error_code, 0, &f.error_message)?;
    ensure!(
        f.matching_acls.len() == 1
            && f.matching_acls[0].error_code == 0
            && f.matching_acls[0].principal.as_str() == principal
            && f.matching_acls[0].resource_name.as_str() == topic
            && f.matching_acls[0].operation == Operation::Read.code(),
        "DeleteAcls matched {:?}",
        f.matching_acls
    );
    ctx.eventually(|| {
        let topics = described(&mut w, 3, &principal)?;
        ensure!(topics.is_empty(), "DescribeAcls v3 still shows {topics:?} after DeleteAcls");
        Ok(())
    })
}

// ---- SCRAM credentials -------------------------------------------------------------------

const ITERATIONS: i32 = 4096;

fn upsertion(user: &str) -> ScramCredentialUpsertion {
    let salt = scram::random_bytes(24);
    let mut u = ScramCredentialUpsertion::default();
    u.name = sbs(user);
    u.mechanism = Mechanism::Sha256.code();
    u.iterations = ITERATIONS;
    u.salted_password = scram::salted_password(Mechanism::Sha256, "sweep-pw", &salt, ITERATIONS).into();
    u.salt = salt.into();
    u
}

fn alter_scram(w: &mut Wire, v: i16, user: &str, upsert: bool) -> Result<AlterUserScramCredentialsResponse, String> {
    let mut req = AlterUserScramCredentialsRequest::default();
    if upsert {
        req.upsertions = vec![upsertion(user)];
    } else {
        let mut d = ScramCredentialDeletion::default();
        d.name = sbs(user);
        d.mechanism = Mechanism::Sha256.code();
        req.deletions = vec![d];
    }
    w.call(ApiKey::AlterUserScramCredentials, v, &req)
}

/// Per user asked for (None: all users): (user, error, [(mechanism, iterations)]).
type Credentials = Vec<(String, i16, Vec<(i8, i32)>)>;

fn describe_scram(w: &mut Wire, v: i16, users: Option<&[&str]>) -> Result<Credentials, String> {
    let mut req = DescribeUserScramCredentialsRequest::default();
    req.users = users.map(|us| {
        us.iter()
            .map(|u| {
                let mut n = UserName::default();
                n.name = sbs(u);
                n
            })
            .collect()
    });
    let r: DescribeUserScramCredentialsResponse = w.call(ApiKey::DescribeUserScramCredentials, v, &req)?;
    expect_code_msg("DescribeUserScramCredentials", r.error_code, 0, &r.error_message)?;
    // In no particular order (Kafka's is not the request's).
    let mut users: Credentials = r
        .results
        .iter()
        .map(|u| {
            (u.user.to_string(), u.error_code, u.credential_infos.iter().map(|c| (c.mechanism, c.iterations)).collect())
        })
        .collect();
    users.sort();
    Ok(users)
}

fn expect_credential(w: &mut Wire, user: &str, present: bool) -> Check {
    let got = describe_scram(w, 0, Some(&[user]))?;
    let want = if present {
        vec![(user.to_string(), 0, vec![(Mechanism::Sha256.code(), ITERATIONS)])]
    } else {
        vec![(user.to_string(), ErrorCode::ResourceNotFound.code(), vec![])]
    };
    ensure!(got == want, "DescribeUserScramCredentials v0 of {user}: {got:?}, expected {want:?}");
    Ok(())
}

/// A credential is stored (and described), then deleted (RESOURCE_NOT_FOUND after).
pub(crate) fn alter_user_scram_credentials(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let user = ctx.name("scram-alter", v);
    for (upsert, what) in [(true, "upserting"), (false, "deleting")] {
        let r = alter_scram(&mut w, v, &user, upsert)?;
        ensure!(r.results.len() == 1 && r.results[0].user.as_str() == user, "results {:?}", r.results);
        expect_code_msg(&format!("{what} {user}"), r.results[0].error_code, 0, &r.results[0].error_message)?;
        ctx.eventually(|| expect_credential(&mut w, &user, upsert))?;
    }
    Ok(())
}

/// A stored credential is described by name and among all users; an unknown user is
/// RESOURCE_NOT_FOUND.
pub(crate) fn describe_user_scram_credentials(ctx: &Ctx, v: i16) -> Check {
    let mut w = ctx.plain()?;
    let user = ctx.name("scram-describe", v);
    let unknown = ctx.name("scram-unknown", v);
    let r = alter_scram(&mut w, 0, &user, true)?;
    expect_code_msg("AlterUserScramCredentials v0", r.results[0].error_code, 0, &r.results[0].error_message)?;
    let mine = (user.clone(), 0, vec![(Mechanism::Sha256.code(), ITERATIONS)]);
    ctx.eventually(|| {
        let got = describe_scram(&mut w, v, Some(&[&user, &unknown]))?;
        let mut want = vec![mine.clone(), (unknown.clone(), ErrorCode::ResourceNotFound.code(), vec![])];
        want.sort();
        ensure!(got == want, "described {got:?}, expected {want:?}");
        Ok(())
    })?;
    let all = describe_scram(&mut w, v, None)?;
    ensure!(all.contains(&mine), "all users: {all:?} without {user}");
    let r = alter_scram(&mut w, 0, &user, false)?;
    expect_code("deleting the credential", r.results[0].error_code, 0)
}
