//! The ACL model: bindings, filters, and the resource, pattern, operation and permission
//! enums with their Kafka wire codes.
//!
//! A LITERAL pattern is one name, or `*` for every name of the type; a PREFIXED pattern covers
//! every name that starts with it. A principal is `Type:name` (`User:alice`), and `User:*`
//! stands for every principal. A host is a client IP address, or `*` for any.
//!
//! **Persistence.** A binding is kept as JSON in the broker's catalog, its enums under their
//! Kafka names:
//! `{"resource_type":"TOPIC","resource_name":"orders-","pattern":"PREFIXED",
//! "principal":"User:alice","host":"*","operation":"READ","permission":"ALLOW"}`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The one name of the CLUSTER resource: the authorizer only ever asks about this name, so a
/// CLUSTER ACL under any other name could never apply (Kafka refuses it for that reason).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A LITERAL resource name matching every name of its type; as a host, any host.
pub const WILDCARD: &str = "*";
/// The principal of an ACL that applies to every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// A Kafka enum with an `i8` wire code: generates `code`, `from_code` (the concrete values
/// only), `name` (Kafka's constant name, also the serde name) and the `Wire` impl that the
/// error messages use.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident ($what:literal, others: $others:expr) {
            $($(#[$vmeta:meta])* $variant:ident = $code:literal, $name:literal;)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $ty {
            $($(#[$vmeta])* $variant,)+
        }

        impl $ty {
            /// Every value, in wire-code order.
            pub const VALUES: &'static [$ty] = &[$($ty::$variant),+];

            pub fn code(self) -> i8 {
                match self {
                    $($ty::$variant => $code,)+
                }
            }

            pub fn from_code(code: i8) -> Option<$ty> {
                match code {
                    $($code => Some($ty::$variant),)+
                    _ => None,
                }
            }

            /// Kafka's name for the value (`TRANSACTIONAL_ID`).
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl Wire for $ty {
            const WHAT: &'static str = $what;
            const OTHERS: &'static [(i8, &'static str)] = $others;
            const VALUES: &'static [$ty] = $ty::VALUES;

            fn from_code(code: i8) -> Option<$ty> {
                $ty::from_code(code)
            }

            fn code(self) -> i8 {
                $ty::code(self)
            }

            fn name(self) -> &'static str {
                $ty::name(self)
            }
        }
    };
}

/// What the error messages need to know about a wire enum.
trait Wire: Copy + 'static {
    /// What the field is called in a message ("resource type").
    const WHAT: &'static str;
    /// Codes Kafka defines that are not values of the enum (`UNKNOWN`, `ANY`, ...).
    const OTHERS: &'static [(i8, &'static str)];
    const VALUES: &'static [Self];
    fn from_code(code: i8) -> Option<Self>;
    fn code(self) -> i8;
    fn name(self) -> &'static str;
}

wire_enum! {
    /// What kind of resource an ACL is about.
    pub enum ResourceType ("resource type", others: &[(0, "UNKNOWN"), (1, "ANY")]) {
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
}

wire_enum! {
    /// How a stored ACL's resource name is matched.
    pub enum PatternType ("pattern type", others: &[(0, "UNKNOWN"), (1, "ANY"), (2, "MATCH")]) {
        /// The name itself; `*` is every name of the type.
        Literal = 3, "LITERAL";
        /// Every name that starts with it.
        Prefixed = 4, "PREFIXED";
    }
}

wire_enum! {
    pub enum Operation ("operation", others: &[(0, "UNKNOWN"), (1, "ANY")]) {
        /// Every operation, for ALLOW and DENY alike.
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
}

wire_enum! {
    pub enum Permission ("permission type", others: &[(0, "UNKNOWN"), (1, "ANY")]) {
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
}

wire_enum! {
    /// How a DescribeAcls / DeleteAcls filter matches resource patterns (see `AclFilter::matches`).
    pub enum PatternFilter ("pattern type filter", others: &[(0, "UNKNOWN")]) {
        Any = 1, "ANY";
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
}

/// Why an ACL or an ACL filter from the wire cannot be used, saying what to send instead;
/// CreateAcls and DeleteAcls answer INVALID_REQUEST with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclRefused {
    /// A code that is not a concrete value (`what` names the field, `code` the code sent).
    #[error("{what} {code} cannot be stored in an ACL; use one of {choices}")]
    NotConcrete { what: &'static str, code: String, choices: String },
    #[error("{what} filter {code} matches nothing; use ANY (1) or one of {choices}")]
    FilterMatchesNothing { what: &'static str, code: String, choices: String },
    #[error("{what} {code} matches nothing; use one of {choices}")]
    PatternFilter { what: &'static str, code: String, choices: String },
    /// The resource type's name.
    #[error("the resource name is empty; name the resource, or use \"{WILDCARD}\" with pattern LITERAL for every {0} resource")]
    EmptyName(&'static str),
    #[error("the only valid name for the CLUSTER resource is {CLUSTER_NAME}, not {0:?}; use that name")]
    ClusterName(String),
    #[error("principal {0:?} is not of the form Type:name; write e.g. \"User:alice\", or \"{WILDCARD_PRINCIPAL}\" for every principal")]
    Principal(String),
    #[error("the host is empty; use \"{WILDCARD}\" for any host, or a client's IP address")]
    EmptyHost,
    #[error("host {0:?} is not an IP address; ACLs are matched against the client's IP address, so give one (e.g. \"10.0.0.5\" or \"::1\"), or \"{WILDCARD}\" for any host")]
    Host(String),
}

/// `code` as a concrete value of `T`, or why not.
fn concrete<T: Wire>(code: i8) -> Result<T, AclRefused> {
    T::from_code(code).ok_or_else(|| AclRefused::NotConcrete {
        what: T::WHAT,
        code: describe_code::<T>(code),
        choices: choices::<T>(),
    })
}

/// `code` as a filter field: ANY (1) is `None`, a concrete value is `Some`, anything else
/// (UNKNOWN, or a code this broker does not know) is refused.
fn filter_code<T: Wire>(code: i8) -> Result<Option<T>, AclRefused> {
    if code == 1 {
        return Ok(None);
    }
    T::from_code(code).map(Some).ok_or_else(|| AclRefused::FilterMatchesNothing {
        what: T::WHAT,
        code: describe_code::<T>(code),
        choices: choices::<T>(),
    })
}

/// `"0 (UNKNOWN)"`, or `"99 (not a Kafka code)"`.
fn describe_code<T: Wire>(code: i8) -> String {
    match T::OTHERS.iter().find(|(c, _)| *c == code) {
        Some((_, name)) => format!("{code} ({name})"),
        None => format!("{code} (not a Kafka code)"),
    }
}

/// `"TOPIC (2), GROUP (3), ..."`.
fn choices<T: Wire>() -> String {
    T::VALUES.iter().map(|v| format!("{} ({})", v.name(), v.code())).collect::<Vec<_>>().join(", ")
}

/// One stored ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern: PatternType,
    /// `Type:name`; `User:*` for every principal.
    pub principal: String,
    /// A client IP address, or `*` for any.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// A binding from CreateAcls' wire fields, or why it cannot be stored (Kafka's checks,
    /// plus one of ours: the host must be an IP address or `*`, because ACLs are matched
    /// against the client's address and a host name would silently never match).
    pub fn from_wire(
        resource_type: i8,
        resource_name: &str,
        pattern: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<AclBinding, AclRefused> {
        let resource_type = concrete::<ResourceType>(resource_type)?;
        let pattern = concrete::<PatternType>(pattern)?;
        let operation = concrete::<Operation>(operation)?;
        let permission = concrete::<Permission>(permission)?;
        if resource_name.is_empty() {
            return Err(AclRefused::EmptyName(resource_type.name()));
        }
        if resource_type == ResourceType::Cluster && resource_name != CLUSTER_NAME {
            return Err(AclRefused::ClusterName(resource_name.to_string()));
        }
        match principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => return Err(AclRefused::Principal(principal.to_string())),
        }
        if host.is_empty() {
            return Err(AclRefused::EmptyHost);
        }
        if host != WILDCARD && host.parse::<IpAddr>().is_err() {
            return Err(AclRefused::Host(host.to_string()));
        }
        Ok(AclBinding {
            resource_type,
            resource_name: resource_name.to_string(),
            pattern,
            principal: principal.to_string(),
            host: host.to_string(),
            operation,
            permission,
        })
    }
}

/// A DescribeAcls / DeleteAcls filter; `None` is ANY.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// Matches every binding.
    pub const ANY: AclFilter = AclFilter {
        resource_type: None,
        resource_name: None,
        pattern: PatternFilter::Any,
        principal: None,
        host: None,
        operation: None,
        permission: None,
    };

    /// A filter from DescribeAcls' or DeleteAcls' wire fields. ANY codes become `None`;
    /// UNKNOWN is refused, as Kafka does, since it would match nothing.
    pub fn from_wire(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<AclFilter, AclRefused> {
        let pattern = PatternFilter::from_code(pattern).ok_or_else(|| AclRefused::PatternFilter {
            what: PatternFilter::WHAT,
            code: describe_code::<PatternFilter>(pattern),
            choices: choices::<PatternFilter>(),
        })?;
        Ok(AclFilter {
            resource_type: filter_code(resource_type)?,
            resource_name: resource_name.map(str::to_string),
            pattern,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation: filter_code(operation)?,
            permission: filter_code(permission)?,
        })
    }

    /// Kafka's filter semantics. Principal, host, operation and permission match when equal
    /// (strings compared exactly: the filter `User:*` finds the wildcard ACLs, not everyone's).
    /// For the resource pattern:
    /// - ANY: any pattern type; a name matches only an equal name;
    /// - LITERAL / PREFIXED: that pattern type, with an equal name;
    /// - MATCH: every binding that applies to the named resource: LITERAL with the name,
    ///   LITERAL `*`, and PREFIXED whose prefix starts the name.
    ///
    /// With no name, every name matches.
    pub fn matches(&self, b: &AclBinding) -> bool {
        self.resource_type.is_none_or(|t| t == b.resource_type)
            && self.pattern_matches(b)
            && self.principal.as_deref().is_none_or(|p| p == b.principal)
            && self.host.as_deref().is_none_or(|h| h == b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }

    fn pattern_matches(&self, b: &AclBinding) -> bool {
        let type_matches = match self.pattern {
            PatternFilter::Any | PatternFilter::Match => true,
            PatternFilter::Literal => b.pattern == PatternType::Literal,
            PatternFilter::Prefixed => b.pattern == PatternType::Prefixed,
        };
        let Some(name) = self.resource_name.as_deref() else { return type_matches };
        type_matches
            && match (self.pattern, b.pattern) {
                (PatternFilter::Match, PatternType::Literal) => name == b.resource_name || b.resource_name == WILDCARD,
                (PatternFilter::Match, PatternType::Prefixed) => name.starts_with(b.resource_name.as_str()),
                _ => name == b.resource_name,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{acl, topic_acl, ALICE, BOB};
    use super::*;

    use Operation::*;
    use PatternType::{Literal, Prefixed};
    use Permission::{Allow, Deny};
    use ResourceType::{Group, Topic};

    /// The bindings `f` matches, in order.
    fn matching(bindings: &[AclBinding], f: &AclFilter) -> Vec<AclBinding> {
        bindings.iter().filter(|b| f.matches(b)).cloned().collect()
    }

    #[test]
    fn from_wire_builds_a_valid_binding() {
        let b = AclBinding::from_wire(2, "orders-", 4, ALICE, "10.0.0.1", 3, 3).unwrap();
        assert_eq!(
            b,
            AclBinding {
                resource_type: Topic,
                resource_name: "orders-".to_string(),
                pattern: Prefixed,
                principal: ALICE.to_string(),
                host: "10.0.0.1".to_string(),
                operation: Read,
                permission: Allow,
            }
        );
        assert!(AclBinding::from_wire(4, CLUSTER_NAME, 3, "User:*", "*", 12, 2).is_ok());
        assert!(AclBinding::from_wire(7, "bob", 3, "User:alice:with:colons", "::1", 13, 3).is_ok());
    }

    #[test]
    fn from_wire_refuses_what_cannot_be_stored() {
        let err = |rt, name, pt, principal, host, op, perm| {
            AclBinding::from_wire(rt, name, pt, principal, host, op, perm).expect_err("must be refused").to_string()
        };
        let e = err(1, "t", 3, ALICE, "*", 3, 3);
        assert!(e.contains("resource type 1 (ANY)") && e.contains("TOPIC (2)"), "{e}");
        assert!(err(0, "t", 3, ALICE, "*", 3, 3).contains("0 (UNKNOWN)"));
        assert!(err(8, "t", 3, ALICE, "*", 3, 3).contains("8 (not a Kafka code)"));
        let e = err(2, "t", 2, ALICE, "*", 3, 3);
        assert!(e.contains("pattern type 2 (MATCH)") && e.contains("PREFIXED (4)"), "{e}");
        assert!(err(2, "t", 1, ALICE, "*", 3, 3).contains("pattern type 1 (ANY)"));
        assert!(err(2, "t", 3, ALICE, "*", 1, 3).contains("operation 1 (ANY)"));
        assert!(err(2, "t", 3, ALICE, "*", 15, 3).contains("operation 15"));
        assert!(err(2, "t", 3, ALICE, "*", 3, 1).contains("permission type 1 (ANY)"));
        assert!(err(2, "t", 3, ALICE, "*", 3, 0).contains("permission type 0 (UNKNOWN)"));
        assert!(err(2, "", 3, ALICE, "*", 3, 3).contains("resource name is empty"));
        let e = err(4, "my-cluster", 3, ALICE, "*", 7, 3);
        assert!(e.contains("kafka-cluster") && e.contains("my-cluster"), "{e}");
        assert!(err(4, WILDCARD, 3, ALICE, "*", 7, 3).contains("kafka-cluster"));
        for principal in ["alice", "", ":alice", "User:"] {
            assert!(err(2, "t", 3, principal, "*", 3, 3).contains("Type:name"), "{principal:?}");
        }
        assert!(err(2, "t", 3, ALICE, "", 3, 3).contains("host is empty"));
        assert!(err(2, "t", 3, ALICE, "broker-1.example", 3, 3).contains("not an IP address"));
    }

    #[test]
    fn filter_from_wire_reads_any_as_none_and_refuses_unknown() {
        let f = AclFilter::from_wire(1, None, 1, None, None, 1, 1).unwrap();
        assert_eq!(f, AclFilter::ANY);
        let f = AclFilter::from_wire(2, Some("t"), 2, Some(ALICE), Some("*"), 3, 2).unwrap();
        assert_eq!(
            f,
            AclFilter {
                resource_type: Some(Topic),
                resource_name: Some("t".to_string()),
                pattern: PatternFilter::Match,
                principal: Some(ALICE.to_string()),
                host: Some("*".to_string()),
                operation: Some(Read),
                permission: Some(Deny),
            }
        );
        let e = AclFilter::from_wire(0, None, 1, None, None, 1, 1).unwrap_err().to_string();
        assert!(e.contains("resource type filter 0 (UNKNOWN)") && e.contains("ANY (1)"), "{e}");
        assert!(AclFilter::from_wire(1, None, 0, None, None, 1, 1).unwrap_err().to_string().contains("0 (UNKNOWN)"));
        assert!(AclFilter::from_wire(1, None, 5, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(1, None, 1, None, None, 0, 1)
            .unwrap_err()
            .to_string()
            .contains("operation filter"));
        assert!(AclFilter::from_wire(1, None, 1, None, None, 1, 0)
            .unwrap_err()
            .to_string()
            .contains("permission type filter"));
    }

    /// Bindings for the filter tests, one of each pattern that could match the topic "orders".
    fn filter_fixture() -> Vec<AclBinding> {
        vec![
            topic_acl("orders", Literal, ALICE, Read, Allow),
            topic_acl(WILDCARD, Literal, BOB, Write, Deny),
            topic_acl("ord", Prefixed, ALICE, Describe, Allow),
            topic_acl("orders", Prefixed, BOB, Read, Allow),
            topic_acl("pay", Prefixed, ALICE, Read, Allow),
            topic_acl("payments", Literal, ALICE, Read, Allow),
            acl(Group, "orders", Literal, ALICE, Read, Allow),
        ]
    }

    fn names_matched(f: &AclFilter) -> Vec<(ResourceType, String, PatternType)> {
        matching(&filter_fixture(), f).into_iter().map(|b| (b.resource_type, b.resource_name, b.pattern)).collect()
    }

    fn topic_filter(name: Option<&str>, pattern: PatternFilter) -> AclFilter {
        AclFilter { resource_type: Some(Topic), resource_name: name.map(str::to_string), pattern, ..AclFilter::ANY }
    }

    #[test]
    fn filter_any_matches_every_pattern_and_an_equal_name() {
        assert_eq!(matching(&filter_fixture(), &AclFilter::ANY), filter_fixture());
        assert_eq!(
            names_matched(&topic_filter(Some("orders"), PatternFilter::Any)),
            vec![(Topic, "orders".into(), Literal), (Topic, "orders".into(), Prefixed)]
        );
        assert_eq!(names_matched(&topic_filter(None, PatternFilter::Any)).len(), 6, "every topic binding");
    }

    #[test]
    fn filter_literal_and_prefixed_match_their_pattern_type() {
        assert_eq!(
            names_matched(&topic_filter(Some("orders"), PatternFilter::Literal)),
            vec![(Topic, "orders".into(), Literal)]
        );
        assert_eq!(
            names_matched(&topic_filter(Some("orders"), PatternFilter::Prefixed)),
            vec![(Topic, "orders".into(), Prefixed)]
        );
        // No name: every binding of that pattern type.
        assert_eq!(
            names_matched(&topic_filter(None, PatternFilter::Prefixed)),
            vec![(Topic, "ord".into(), Prefixed), (Topic, "orders".into(), Prefixed), (Topic, "pay".into(), Prefixed)]
        );
        // The wildcard is matched as a name, not expanded.
        assert_eq!(
            names_matched(&topic_filter(Some(WILDCARD), PatternFilter::Literal)),
            vec![(Topic, WILDCARD.into(), Literal)]
        );
    }

    #[test]
    fn filter_match_finds_every_binding_that_applies_to_the_resource() {
        assert_eq!(
            names_matched(&topic_filter(Some("orders"), PatternFilter::Match)),
            vec![
                (Topic, "orders".into(), Literal),
                (Topic, WILDCARD.into(), Literal),
                (Topic, "ord".into(), Prefixed),
                (Topic, "orders".into(), Prefixed),
            ]
        );
        assert_eq!(
            names_matched(&topic_filter(Some("ord"), PatternFilter::Match)),
            vec![(Topic, WILDCARD.into(), Literal), (Topic, "ord".into(), Prefixed)]
        );
        assert_eq!(names_matched(&topic_filter(None, PatternFilter::Match)).len(), 6);
    }

    #[test]
    fn filter_entry_fields_compare_exactly() {
        let acls = filter_fixture();
        let bob = AclFilter { principal: Some(BOB.to_string()), ..AclFilter::ANY };
        assert_eq!(matching(&acls, &bob).len(), 2);
        let wildcard = AclFilter { principal: Some(WILDCARD_PRINCIPAL.to_string()), ..AclFilter::ANY };
        assert!(matching(&acls, &wildcard).is_empty(), "User:* finds wildcard ACLs, not everyone's");
        let denies = AclFilter { permission: Some(Deny), ..AclFilter::ANY };
        assert_eq!(matching(&acls, &denies), vec![topic_acl(WILDCARD, Literal, BOB, Write, Deny)]);
        let describes = AclFilter { operation: Some(Describe), ..AclFilter::ANY };
        assert_eq!(matching(&acls, &describes), vec![topic_acl("ord", Prefixed, ALICE, Describe, Allow)]);
        let host = AclFilter { host: Some("10.0.0.1".to_string()), ..AclFilter::ANY };
        assert!(matching(&acls, &host).is_empty());
        let groups = AclFilter { resource_type: Some(Group), ..AclFilter::ANY };
        assert_eq!(matching(&acls, &groups), vec![acl(Group, "orders", Literal, ALICE, Read, Allow)]);
    }

    #[test]
    fn codes_round_trip_and_reject_non_concrete_values() {
        for &t in ResourceType::VALUES {
            assert_eq!(ResourceType::from_code(t.code()), Some(t));
        }
        for &o in Operation::VALUES {
            assert_eq!(Operation::from_code(o.code()), Some(o));
        }
        assert_eq!(ResourceType::VALUES.iter().map(|t| t.code()).collect::<Vec<_>>(), [2, 3, 4, 5, 6, 7]);
        assert_eq!(Operation::VALUES.iter().map(|o| o.code()).collect::<Vec<_>>(), (2..=14).collect::<Vec<i8>>());
        assert_eq!(ResourceType::TransactionalId.name(), "TRANSACTIONAL_ID");
        assert_eq!(Operation::DescribeConfigs.name(), "DESCRIBE_CONFIGS");
        assert_eq!((PatternType::Literal.code(), PatternType::Prefixed.code()), (3, 4));
        assert_eq!((Permission::Deny.code(), Permission::Allow.code()), (2, 3));
        for code in [0, 1, 8, -1] {
            assert_eq!(ResourceType::from_code(code), None, "{code}");
        }
        assert_eq!(PatternType::from_code(2), None, "MATCH is for filters only");
        assert_eq!(PatternFilter::from_code(2), Some(PatternFilter::Match));
        assert_eq!(Operation::from_code(1), None);
        assert_eq!(Permission::from_code(1), None);
    }

    #[test]
    fn binding_round_trips_through_json_under_kafka_names() {
        let b = AclBinding {
            resource_type: ResourceType::TransactionalId,
            resource_name: "tx-".to_string(),
            pattern: Prefixed,
            principal: ALICE.to_string(),
            host: "::1".to_string(),
            operation: DescribeConfigs,
            permission: Deny,
        };
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(
            json,
            r#"{"resource_type":"TRANSACTIONAL_ID","resource_name":"tx-","pattern":"PREFIXED","principal":"User:alice","host":"::1","operation":"DESCRIBE_CONFIGS","permission":"DENY"}"#
        );
        assert_eq!(serde_json::from_str::<AclBinding>(&json).unwrap(), b);
    }
}
