//! DescribeClientQuotas (`kafka-configs --describe --entity-type users|clients`): the quotas
//! set at run time (AlterClientQuotas), from this shard's catalog snapshot, filtered as
//! Kafka filters: each component matches an entity type by name (EXACT), its default
//! (DEFAULT) or any (SPECIFIED); with `strict`, entities with other types are left out. The
//! static quota settings of the config file are not entities and are not listed.
//!
//! Authorization, Kafka's: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.

use proto_kafka::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use proto_kafka::messages::{ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::alter_client_quotas::{CLIENT_ID, IP, USER};
use super::{authz, str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::auth::acl::Operation;
use crate::protocol::ErrorCode;
use crate::quota::{EntityName, QuotaEntity};

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::DescribeClientQuotas, 0, 1);

// Kafka's ClientQuotaFilterComponent match types.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

/// One component of the filter: which part of an entity, and what it must be.
struct Component {
    user: bool,
    want: Want,
}

enum Want {
    Name(String),
    Default,
    Any,
}

fn component(c: &proto_kafka::messages::describe_client_quotas_request::ComponentData) -> Result<Component, String> {
    let user = match c.entity_type.as_str() {
        USER => true,
        CLIENT_ID => false,
        IP => return Err("ip quotas are not supported".into()),
        other => return Err(format!("unknown quota entity type {other:?}")),
    };
    let want = match (c.match_type, &c._match) {
        (MATCH_EXACT, Some(m)) => Want::Name(m.to_string()),
        (MATCH_EXACT, None) => return Err("an EXACT match needs a name".into()),
        (MATCH_DEFAULT, _) => Want::Default,
        (MATCH_ANY, _) => Want::Any,
        (other, _) => return Err(format!("unknown match type {other}")),
    };
    Ok(Component { user, want })
}

fn matches(e: &QuotaEntity, filter: &[Component], strict: bool) -> bool {
    let all = filter.iter().all(|c| {
        let part = if c.user { &e.user } else { &e.client_id };
        match (&c.want, part) {
            (_, None) => false,
            (Want::Any, Some(_)) => true,
            (Want::Default, Some(p)) => *p == EntityName::Default,
            (Want::Name(n), Some(EntityName::Named(p))) => n == p,
            (Want::Name(_), Some(EntityName::Default)) => false,
        }
    });
    let parts = usize::from(e.user.is_some()) + usize::from(e.client_id.is_some());
    all && (!strict || parts == filter.len())
}

fn entity_data(kind: &str, name: &EntityName) -> EntityData {
    let mut d = EntityData::default();
    d.entity_type = str_bytes(kind);
    d.entity_name = match name {
        EntityName::Named(n) => Some(str_bytes(n.clone())),
        EntityName::Default => None,
    };
    d
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: DescribeClientQuotasRequest = req.decode()?;
    let mut resp = DescribeClientQuotasResponse::default();
    let refuse = |resp: &mut DescribeClientQuotasResponse, code: ErrorCode, msg: String| {
        resp.error_code = code.code();
        resp.error_message = Some(str_bytes(msg));
        resp.entries = None;
    };
    if !authz::cluster(broker, &req, Operation::DescribeConfigs) {
        refuse(&mut resp, ErrorCode::ClusterAuthorizationFailed, "needs DESCRIBE_CONFIGS on the cluster".into());
        return req.respond(resp);
    }
    let filter: Result<Vec<Component>, String> = r.components.iter().map(component).collect();
    let filter = match filter {
        Ok(f) if f.iter().filter(|c| c.user).count() > 1 || f.iter().filter(|c| !c.user).count() > 1 => {
            refuse(&mut resp, ErrorCode::InvalidRequest, "an entity type appears twice in the filter".into());
            return req.respond(resp);
        }
        Ok(f) => f,
        Err(m) => {
            refuse(&mut resp, ErrorCode::InvalidRequest, m);
            return req.respond(resp);
        }
    };
    resp.error_message = None;
    let catalog = broker.catalog();
    let entries = catalog
        .client_quotas
        .iter()
        .filter(|s| matches(&s.entity, &filter, r.strict))
        .map(|s| {
            let mut e = EntryData::default();
            e.entity = [(USER, &s.entity.user), (CLIENT_ID, &s.entity.client_id)]
                .into_iter()
                .filter_map(|(kind, part)| part.as_ref().map(|p| entity_data(kind, p)))
                .collect();
            e.values = s
                .values
                .iter()
                .map(|(k, v)| {
                    let mut d = ValueData::default();
                    d.key = str_bytes(k.clone());
                    d.value = *v;
                    d
                })
                .collect();
            e
        })
        .collect();
    resp.entries = Some(entries);
    req.respond(resp)
}
