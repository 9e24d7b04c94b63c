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

/// Why a filter component cannot be matched; the response carries the message and
/// Kafka's code for it (`code`).
#[derive(Debug, thiserror::Error)]
enum BadComponent {
    #[error("unknown quota entity type {0:?}; use user, client-id or ip")]
    EntityType(String),
    #[error("an EXACT match needs a name")]
    NoName,
    #[error("match type {0} takes no match string; only EXACT (0) does")]
    MatchString(i8),
    #[error("unknown match type {0}; use 0 (EXACT), 1 (DEFAULT) or 2 (ANY)")]
    MatchType(i8),
}

impl BadComponent {
    /// Kafka's: a type or match type it does not know is UNSUPPORTED_VERSION (a newer
    /// client's), a component it knows but that is malformed INVALID_REQUEST.
    fn code(&self) -> ErrorCode {
        match self {
            BadComponent::EntityType(_) | BadComponent::MatchType(_) => ErrorCode::UnsupportedVersion,
            BadComponent::NoName | BadComponent::MatchString(_) => ErrorCode::InvalidRequest,
        }
    }
}

/// A filter component; `None` for an ip component, which matches nothing here: this broker
/// stores no ip quotas (they are refused when set).
fn component(
    c: &proto_kafka::messages::describe_client_quotas_request::ComponentData,
) -> Result<Option<Component>, BadComponent> {
    let user = match c.entity_type.as_str() {
        USER => Some(true),
        CLIENT_ID => Some(false),
        IP => None,
        other => return Err(BadComponent::EntityType(other.to_string())),
    };
    let want = match (c.match_type, &c._match) {
        (MATCH_EXACT, Some(m)) => Want::Name(m.to_string()),
        (MATCH_EXACT, None) => return Err(BadComponent::NoName),
        (MATCH_DEFAULT | MATCH_ANY, Some(_)) => return Err(BadComponent::MatchString(c.match_type)),
        (MATCH_DEFAULT, None) => Want::Default,
        (MATCH_ANY, None) => Want::Any,
        (other, _) => return Err(BadComponent::MatchType(other)),
    };
    Ok(user.map(|user| Component { user, want }))
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
    let filter: Result<Vec<Option<Component>>, _> = r.components.iter().map(component).collect();
    let (filter, ip) = match filter {
        Ok(f) => {
            let ips = f.iter().filter(|c| c.is_none()).count();
            let f: Vec<Component> = f.into_iter().flatten().collect();
            let users = f.iter().filter(|c| c.user).count();
            if users > 1 || f.len() - users > 1 || ips > 1 {
                refuse(&mut resp, ErrorCode::InvalidRequest, "an entity type appears twice in the filter".into());
                return req.respond(resp);
            }
            if ips > 0 && !f.is_empty() {
                refuse(
                    &mut resp,
                    ErrorCode::InvalidRequest,
                    "an ip component cannot be combined with user or client-id".into(),
                );
                return req.respond(resp);
            }
            (f, ips > 0)
        }
        Err(m) => {
            refuse(&mut resp, m.code(), m.to_string());
            return req.respond(resp);
        }
    };
    resp.error_message = None;
    let catalog = broker.catalog();
    let entries = catalog
        .client_quotas
        .iter()
        .filter(|s| !ip && matches(&s.entity, &filter, r.strict))
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

#[cfg(test)]
mod tests {
    use proto_kafka::messages::alter_client_quotas_request::{
        EntityData as AskedEntity, EntryData as AskedEntry, OpData,
    };
    use proto_kafka::messages::describe_client_quotas_request::ComponentData;
    use proto_kafka::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};

    use super::*;
    use crate::api::fake::Fake;
    use crate::auth::acl::{ResourceType, CLUSTER_NAME};
    use crate::quota::PRODUCER_BYTE_RATE;

    /// Sets producer_byte_rate = `rate` on the entity of (type, name) parts.
    fn set(b: &Fake, entity: &[(&str, Option<&str>)], rate: f64) {
        let mut e = AskedEntry::default();
        for (t, n) in entity {
            let mut d = AskedEntity::default();
            d.entity_type = str_bytes(*t);
            d.entity_name = n.map(str_bytes);
            e.entity.push(d);
        }
        let mut o = OpData::default();
        o.key = str_bytes(PRODUCER_BYTE_RATE);
        o.value = rate;
        e.ops.push(o);
        let mut req = AlterClientQuotasRequest::default();
        req.entries.push(e);
        let resp: AlterClientQuotasResponse = b.call(ApiKey::AlterClientQuotas, 1, &req);
        assert_eq!(resp.entries[0].error_code, 0);
    }

    fn component(entity_type: &str, match_type: i8, name: Option<&str>) -> ComponentData {
        let mut c = ComponentData::default();
        c.entity_type = str_bytes(entity_type);
        c.match_type = match_type;
        c._match = name.map(str_bytes);
        c
    }

    fn describe_as(
        b: &Fake,
        principal: Option<&str>,
        components: Vec<ComponentData>,
        strict: bool,
    ) -> DescribeClientQuotasResponse {
        let mut req = DescribeClientQuotasRequest::default();
        req.components = components;
        req.strict = strict;
        b.call_as(principal, ApiKey::DescribeClientQuotas, 1, &req)
    }

    /// Each entry as "user=alice,client-id=<default>:rate".
    fn entries(resp: &DescribeClientQuotasResponse) -> Vec<String> {
        let entries = resp.entries.as_ref().expect("entries answered");
        entries
            .iter()
            .map(|e| {
                let entity: Vec<String> = e
                    .entity
                    .iter()
                    .map(|d| format!("{}={}", d.entity_type, d.entity_name.as_deref().unwrap_or("<default>")))
                    .collect();
                let values: Vec<String> = e.values.iter().map(|v| format!("{}={}", v.key, v.value)).collect();
                format!("{}:{}", entity.join(","), values.join(","))
            })
            .collect()
    }

    fn broker() -> Fake {
        let b = Fake::new();
        set(&b, &[(USER, Some("alice"))], 1000.0);
        set(&b, &[(USER, None)], 2000.0);
        set(&b, &[(USER, Some("alice")), (CLIENT_ID, Some("app"))], 3000.0);
        set(&b, &[(CLIENT_ID, Some("app"))], 4000.0);
        b
    }

    #[test]
    fn no_components_lists_every_entity_with_its_values() {
        let b = broker();
        let resp = describe_as(&b, None, vec![], false);
        assert_eq!((resp.error_code, resp.error_message.as_ref()), (0, None));
        assert_eq!(
            entries(&resp),
            vec![
                "client-id=app:producer_byte_rate=4000",
                "user=alice:producer_byte_rate=1000",
                "user=alice,client-id=app:producer_byte_rate=3000",
                "user=<default>:producer_byte_rate=2000",
            ]
        );
    }

    #[test]
    fn exact_default_and_any_match_as_in_kafka_and_strict_leaves_out_other_types() {
        let b = broker();
        let alice = || vec![component(USER, MATCH_EXACT, Some("alice"))];
        assert_eq!(
            entries(&describe_as(&b, None, alice(), false)),
            vec!["user=alice:producer_byte_rate=1000", "user=alice,client-id=app:producer_byte_rate=3000"]
        );
        assert_eq!(entries(&describe_as(&b, None, alice(), true)), vec!["user=alice:producer_byte_rate=1000"]);
        let default = vec![component(USER, MATCH_DEFAULT, None)];
        assert_eq!(entries(&describe_as(&b, None, default, true)), vec!["user=<default>:producer_byte_rate=2000"]);
        let any_user_with_app = vec![component(USER, MATCH_ANY, None), component(CLIENT_ID, MATCH_EXACT, Some("app"))];
        assert_eq!(
            entries(&describe_as(&b, None, any_user_with_app, true)),
            vec!["user=alice,client-id=app:producer_byte_rate=3000"]
        );
    }

    #[test]
    fn an_invalid_filter_is_refused_with_kafkas_code_and_no_entries() {
        let b = broker();
        let (invalid, unsupported) = (ErrorCode::InvalidRequest, ErrorCode::UnsupportedVersion);
        let filters = vec![
            (vec![component(IP, MATCH_ANY, None), component(USER, MATCH_ANY, None)], invalid),
            (vec![component("group", MATCH_ANY, None)], unsupported),
            (vec![component(USER, MATCH_EXACT, None)], invalid),
            (vec![component(USER, MATCH_DEFAULT, Some("alice"))], invalid),
            (vec![component(USER, 9, None)], unsupported),
            (vec![component(USER, MATCH_ANY, None), component(USER, MATCH_DEFAULT, None)], invalid),
        ];
        for (f, code) in filters {
            let resp = describe_as(&b, None, f, false);
            assert_eq!(resp.error_code, code.code());
            assert!(resp.error_message.is_some());
            assert!(resp.entries.is_none());
        }
        // An ip filter alone is valid; this broker has no ip quotas to match.
        let resp = describe_as(&b, None, vec![component(IP, MATCH_ANY, None)], false);
        assert_eq!((resp.error_code, resp.entries.map(|e| e.len())), (0, Some(0)));
    }

    #[test]
    fn describing_quotas_needs_describe_configs_on_the_cluster() {
        let b = Fake::with(|c| c.authorizer_enabled = true);
        b.allow("User:ops", ResourceType::Cluster, CLUSTER_NAME, Operation::DescribeConfigs);
        let resp = describe_as(&b, Some("User:eve"), vec![], false);
        assert_eq!(resp.error_code, ErrorCode::ClusterAuthorizationFailed.code());
        assert!(resp.entries.is_none());
        let resp = describe_as(&b, Some("User:ops"), vec![], false);
        assert_eq!((resp.error_code, resp.entries.map(|e| e.len())), (0, Some(0)));
    }
}
