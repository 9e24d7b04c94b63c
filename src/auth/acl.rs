//! Kafka's ACL model and the authorizer's decision (Kafka's `StandardAuthorizer`).
//!
//! **The model.** An ACL (`AclBinding`) says that a principal, connecting from a host, is
//! ALLOWed or DENYed one operation on the resources of one type whose names match a pattern.
//! A LITERAL pattern is one name, or `*` for every name of the type; a PREFIXED pattern covers
//! every name that starts with it. A principal is `Type:name` (`User:alice`), and `User:*`
//! stands for every principal. A host is a client IP address, or `*` for any.
//!
//! **The decision** (`Acls::authorize`), in Kafka's order:
//! 1. a super user (`super_users`, compared exactly) may do anything;
//! 2. the ACLs that apply are those of the resource's type that are LITERAL with its name,
//!    LITERAL `*`, or PREFIXED with a prefix of its name;
//! 3. if none apply, to anyone at all, the answer is `allow_everyone_if_no_acl_found`;
//! 4. of those whose principal and host match the caller, a DENY for the operation (or for
//!    ALL) refuses, whatever else allows;
//! 5. an ALLOW for the operation, for ALL, or for an operation that implies it grants.
//!    READ, WRITE, DELETE and ALTER imply DESCRIBE, and ALTER_CONFIGS implies
//!    DESCRIBE_CONFIGS: whoever may use or change a resource may see it. The implications
//!    hold for ALLOW only, so a DENY READ still lets the principal DESCRIBE;
//! 6. otherwise refused.
//!
//! **Persistence.** A binding is kept as JSON in the broker's catalog, its enums under their
//! Kafka names:
//! `{"resource_type":"TOPIC","resource_name":"orders-","pattern":"PREFIXED",
//! "principal":"User:alice","host":"*","operation":"READ","permission":"ALLOW"}`.
//!
//! **Cost.** Every Produce and Fetch asks, so `Acls` is built once per change into an
//! immutable index that each shard reads without a lock: per resource type, a map from
//! literal name to rules, the `*` rules, and a map from prefix to rules together with the
//! distinct prefix lengths, so a name's prefixes are found by one lookup per length that
//! exists. Hosts are parsed to `IpAddr` at build time. A decision allocates nothing.
//!
//! This module does no I/O.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The one name of the CLUSTER resource: the authorizer only ever asks about this name, so a
/// CLUSTER ACL under any other name could never apply (Kafka refuses it for that reason).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A LITERAL resource name matching every name of its type; as a host, any host.
pub const WILDCARD: &str = "*";
/// The principal of an ACL that applies to every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// The name Kafka's `authorizeByResourceType` asks the ordinary question about before
/// looking at the ACLs of the type: a stand-in for "a resource no ACL was written for".
const PROBE_NAME: &str = "hardcode";

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

impl ResourceType {
    /// This type's place in `Acls::by_type`.
    fn slot(self) -> usize {
        self as usize
    }
}

impl Operation {
    /// Whether this operation, in a DENY, refuses `op`: only itself and ALL, no implications.
    /// (`authorize_any` counts ALLOWs the same way, as Kafka does.)
    fn names(self, op: Operation) -> bool {
        self == op || self == Operation::All
    }

    /// Whether this operation, in an ALLOW, grants `op`, implications included.
    fn grants(self, op: Operation) -> bool {
        use Operation::*;
        self.names(op)
            || match op {
                Describe => matches!(self, Read | Write | Delete | Alter),
                DescribeConfigs => self == AlterConfigs,
                _ => false,
            }
    }
}

/// `code` as a concrete value of `T`, or a message saying what was sent and what to send.
fn concrete<T: Wire>(code: i8) -> Result<T, String> {
    T::from_code(code).ok_or_else(|| {
        format!("{} {} cannot be stored in an ACL; use one of {}", T::WHAT, describe_code::<T>(code), choices::<T>())
    })
}

/// `code` as a filter field: ANY (1) is `None`, a concrete value is `Some`, anything else
/// (UNKNOWN, or a code this broker does not know) is refused.
fn filter_code<T: Wire>(code: i8) -> Result<Option<T>, String> {
    if code == 1 {
        return Ok(None);
    }
    T::from_code(code).map(Some).ok_or_else(|| {
        format!(
            "{} filter {} matches nothing; use ANY (1) or one of {}",
            T::WHAT,
            describe_code::<T>(code),
            choices::<T>()
        )
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
    ) -> Result<AclBinding, String> {
        let resource_type = concrete::<ResourceType>(resource_type)?;
        let pattern = concrete::<PatternType>(pattern)?;
        let operation = concrete::<Operation>(operation)?;
        let permission = concrete::<Permission>(permission)?;
        if resource_name.is_empty() {
            return Err(format!(
                "the resource name is empty; name the resource, or use \"{WILDCARD}\" with pattern LITERAL for \
                 every {} resource",
                resource_type.name()
            ));
        }
        if resource_type == ResourceType::Cluster && resource_name != CLUSTER_NAME {
            return Err(format!(
                "the only valid name for the CLUSTER resource is {CLUSTER_NAME}, not {resource_name:?}; use that name"
            ));
        }
        match principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Err(format!(
                    "principal {principal:?} is not of the form Type:name; write e.g. \"User:alice\", or \
                     \"{WILDCARD_PRINCIPAL}\" for every principal"
                ))
            }
        }
        if host.is_empty() {
            return Err(format!("the host is empty; use \"{WILDCARD}\" for any host, or a client's IP address"));
        }
        if host != WILDCARD && host.parse::<IpAddr>().is_err() {
            return Err(format!(
                "host {host:?} is not an IP address; ACLs are matched against the client's IP address, so give \
                 one (e.g. \"10.0.0.5\" or \"::1\"), or \"{WILDCARD}\" for any host"
            ));
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    ) -> Result<AclFilter, String> {
        let pattern = PatternFilter::from_code(pattern).ok_or_else(|| {
            format!(
                "{} {} matches nothing; use one of {}",
                PatternFilter::WHAT,
                describe_code::<PatternFilter>(pattern),
                choices::<PatternFilter>()
            )
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

/// The authorizer's settings (broker config `super_users`, `allow_everyone_if_no_acl_found`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals allowed everything, compared exactly (`User:admin`).
    pub super_users: Vec<String>,
    /// The answer for a resource no ACL applies to. Kafka's default, and ours, is false.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.iter().any(|s| s == principal)
    }
}

/// An immutable snapshot of all ACLs with their index, built once per change and read by a
/// shard without a lock.
#[derive(Debug, Default)]
pub struct Acls {
    bindings: Vec<AclBinding>,
    by_type: [TypeIndex; ResourceType::VALUES.len()],
}

/// The rules of one resource type, by how their pattern reaches a name.
#[derive(Debug, Default)]
struct TypeIndex {
    /// LITERAL rules by name, `*` excluded.
    literal: HashMap<String, Vec<Rule>>,
    /// LITERAL `*` rules.
    wildcard: Vec<Rule>,
    /// PREFIXED rules by prefix.
    prefixed: HashMap<String, Vec<Rule>>,
    /// The distinct lengths of the keys of `prefixed`, ascending: the only prefixes of a name
    /// worth looking up.
    prefix_lens: Vec<usize>,
}

/// The who/how of one binding, prepared for matching.
#[derive(Debug)]
struct Rule {
    principal: PrincipalMatch,
    host: HostMatch,
    operation: Operation,
    permission: Permission,
}

#[derive(Debug)]
enum PrincipalMatch {
    /// `User:*`. As in Kafka, it stands for every principal, whatever its type.
    Every,
    Only(String),
}

#[derive(Debug)]
enum HostMatch {
    Every,
    /// Canonical: an IPv4-mapped IPv6 address is stored as the IPv4 one, as a dual-stack
    /// listener reports IPv4 clients in that form.
    Only(IpAddr),
    /// Not an IP address (only possible in a catalog written by hand): like Kafka's string
    /// comparison against the client's address, it matches no client.
    Never,
}

impl Rule {
    fn new(b: &AclBinding) -> Rule {
        let principal = match b.principal.as_str() {
            WILDCARD_PRINCIPAL => PrincipalMatch::Every,
            p => PrincipalMatch::Only(p.to_string()),
        };
        let host = match b.host.as_str() {
            WILDCARD => HostMatch::Every,
            h => h.parse::<IpAddr>().map_or(HostMatch::Never, |ip| HostMatch::Only(ip.to_canonical())),
        };
        Rule { principal, host, operation: b.operation, permission: b.permission }
    }

    /// Whether the rule is about this caller; `host` is canonical.
    fn is_for(&self, principal: &str, host: IpAddr) -> bool {
        let principal_matches = match &self.principal {
            PrincipalMatch::Every => true,
            PrincipalMatch::Only(p) => p == principal,
        };
        let host_matches = match self.host {
            HostMatch::Every => true,
            HostMatch::Only(ip) => ip == host,
            HostMatch::Never => false,
        };
        principal_matches && host_matches
    }
}

impl TypeIndex {
    /// Every rule that applies to the resource `name`, whoever it is for.
    fn rules_for<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        let literal: &[Rule] = self.literal.get(name).map_or(&[], Vec::as_slice);
        literal.iter().chain(&self.wildcard).chain(self.prefixes_of(name).flatten())
    }

    /// The PREFIXED rule lists whose prefix starts `name` (`name` itself included).
    fn prefixes_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Vec<Rule>> + 'a {
        self.prefix_lens
            .iter()
            .take_while(move |&&len| len <= name.len())
            // `get` is None where `len` splits a character: no stored prefix ends there.
            .filter_map(move |&len| name.get(..len))
            .filter_map(move |prefix| self.prefixed.get(prefix))
    }
}

impl Acls {
    /// The snapshot of `bindings`, duplicates removed (the first of each kept in place).
    pub fn new(bindings: Vec<AclBinding>) -> Acls {
        let mut seen = HashSet::with_capacity(bindings.len());
        let bindings: Vec<AclBinding> = bindings.into_iter().filter(|b| seen.insert(b.clone())).collect();
        let mut by_type: [TypeIndex; ResourceType::VALUES.len()] = Default::default();
        for b in &bindings {
            let index = &mut by_type[b.resource_type.slot()];
            let rule = Rule::new(b);
            match b.pattern {
                PatternType::Literal if b.resource_name == WILDCARD => index.wildcard.push(rule),
                PatternType::Literal => index.literal.entry(b.resource_name.clone()).or_default().push(rule),
                PatternType::Prefixed => index.prefixed.entry(b.resource_name.clone()).or_default().push(rule),
            }
        }
        for index in &mut by_type {
            index.prefix_lens = index.prefixed.keys().map(String::len).collect();
            index.prefix_lens.sort_unstable();
            index.prefix_lens.dedup();
        }
        Acls { bindings, by_type }
    }

    pub fn bindings(&self) -> &[AclBinding] {
        &self.bindings
    }

    /// The bindings `f` matches (DescribeAcls), in stored order.
    pub fn matching(&self, f: &AclFilter) -> Vec<AclBinding> {
        self.bindings.iter().filter(|b| f.matches(b)).cloned().collect()
    }

    /// Whether `principal` connecting from `host` may do `op` on the resource `name` of type
    /// `resource`: the decision in the module documentation.
    pub fn authorize(
        &self,
        cfg: &AuthorizerConfig,
        principal: &str,
        host: IpAddr,
        op: Operation,
        resource: ResourceType,
        name: &str,
    ) -> bool {
        if cfg.is_super_user(principal) {
            return true;
        }
        let host = host.to_canonical();
        // Any rule at all for the resource, whoever it is for, means the resource is governed
        // by ACLs: the no-ACL default no longer applies to anyone.
        let mut governed = false;
        let mut allowed = false;
        for rule in self.by_type[resource.slot()].rules_for(name) {
            governed = true;
            if !rule.is_for(principal, host) {
                continue;
            }
            match rule.permission {
                Permission::Deny if rule.operation.names(op) => return false,
                Permission::Allow if rule.operation.grants(op) => allowed = true,
                _ => {}
            }
        }
        allowed || (!governed && cfg.allow_everyone_if_no_acl_found)
    }

    /// Whether `principal` from `host` may do `op` on at least one resource of type
    /// `resource` (Kafka's `authorizeByResourceType`, which StandardAuthorizer inherits from
    /// the `Authorizer` interface; used to let a producer without IDEMPOTENT_WRITE on the
    /// cluster be idempotent if it may WRITE to some topic). In Kafka's order:
    /// 1. the ordinary decision for a placeholder name: this passes super users, and, with
    ///    `allow_everyone_if_no_acl_found`, anyone when no ACL reaches that name (standing for
    ///    "some resource nobody wrote an ACL for");
    /// 2. of the caller's rules of the type for `op` or ALL (no implications here), a DENY on
    ///    LITERAL `*` refuses, and then an ALLOW on LITERAL `*` grants;
    /// 3. any other ALLOW grants unless a DENY covers all it allows: for a LITERAL allow, a
    ///    DENY on the same literal or on a prefix of it; for a PREFIXED allow, a DENY on a
    ///    prefix of its prefix (a literal DENY leaves the rest of the prefix allowed).
    pub fn authorize_any(
        &self,
        cfg: &AuthorizerConfig,
        principal: &str,
        host: IpAddr,
        op: Operation,
        resource: ResourceType,
    ) -> bool {
        if self.authorize(cfg, principal, host, op, resource, PROBE_NAME) {
            return true;
        }
        let host = host.to_canonical();
        let index = &self.by_type[resource.slot()];
        let has = |rules: &[Rule], permission: Permission| {
            rules.iter().any(|r| r.permission == permission && r.operation.names(op) && r.is_for(principal, host))
        };
        if has(&index.wildcard, Permission::Deny) {
            return false;
        }
        if has(&index.wildcard, Permission::Allow) {
            return true;
        }
        let denied_by_prefix = |name: &str| index.prefixes_of(name).any(|rules| has(rules, Permission::Deny));
        index.literal.iter().any(|(name, rules)| {
            has(rules, Permission::Allow) && !has(rules, Permission::Deny) && !denied_by_prefix(name)
        }) || index.prefixed.iter().any(|(prefix, rules)| has(rules, Permission::Allow) && !denied_by_prefix(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    use Operation::*;
    use PatternType::{Literal, Prefixed};
    use Permission::{Allow, Deny};
    use ResourceType::{Cluster, Group, Topic};

    const ALICE: &str = "User:alice";
    const BOB: &str = "User:bob";
    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const OTHER_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.to_string(),
            pattern,
            principal: principal.to_string(),
            host: WILDCARD.to_string(),
            operation,
            permission,
        }
    }

    fn topic_acl(name: &str, pattern: PatternType, principal: &str, op: Operation, perm: Permission) -> AclBinding {
        acl(Topic, name, pattern, principal, op, perm)
    }

    fn deny_by_default() -> AuthorizerConfig {
        AuthorizerConfig::default()
    }

    fn allow_by_default() -> AuthorizerConfig {
        AuthorizerConfig { allow_everyone_if_no_acl_found: true, ..AuthorizerConfig::default() }
    }

    /// May `principal` from CLIENT do `op` on topic `name`, nothing allowed by default?
    fn may(acls: &Acls, principal: &str, op: Operation, name: &str) -> bool {
        acls.authorize(&deny_by_default(), principal, CLIENT, op, Topic, name)
    }

    #[test]
    fn literal_acl_applies_to_its_name_only() {
        let acls = Acls::new(vec![topic_acl("orders", Literal, ALICE, Read, Allow)]);
        assert!(may(&acls, ALICE, Read, "orders"));
        assert!(!may(&acls, ALICE, Read, "orders2"));
        assert!(!may(&acls, ALICE, Read, "order"));
        assert!(!may(&acls, ALICE, Write, "orders"), "another operation");
        assert!(!may(&acls, BOB, Read, "orders"), "another principal");
        assert!(!acls.authorize(&deny_by_default(), ALICE, CLIENT, Read, Group, "orders"), "another type");
    }

    #[test]
    fn literal_wildcard_applies_to_every_name_of_its_type() {
        let acls = Acls::new(vec![topic_acl(WILDCARD, Literal, ALICE, Read, Allow)]);
        assert!(may(&acls, ALICE, Read, "orders"));
        assert!(may(&acls, ALICE, Read, "anything-at-all"));
        assert!(!acls.authorize(&deny_by_default(), ALICE, CLIENT, Read, Group, "orders"));
        // A PREFIXED "*" is an ordinary prefix, not a wildcard.
        let acls = Acls::new(vec![topic_acl(WILDCARD, Prefixed, ALICE, Read, Allow)]);
        assert!(!may(&acls, ALICE, Read, "orders"));
        assert!(may(&acls, ALICE, Read, "*orders"));
    }

    #[test]
    fn prefixed_acl_applies_to_names_it_starts() {
        let acls = Acls::new(vec![
            topic_acl("ord", Prefixed, ALICE, Read, Allow),
            topic_acl("payments.eu.", Prefixed, ALICE, Write, Allow),
        ]);
        assert!(may(&acls, ALICE, Read, "ord"), "the prefix itself");
        assert!(may(&acls, ALICE, Read, "orders"));
        assert!(!may(&acls, ALICE, Read, "or"), "shorter than the prefix");
        assert!(!may(&acls, ALICE, Read, "xorders"));
        assert!(may(&acls, ALICE, Write, "payments.eu.cards"));
        assert!(!may(&acls, ALICE, Write, "payments.us.cards"));
        assert!(!may(&acls, ALICE, Read, "payments.eu.cards"), "each prefix keeps its own operation");
    }

    #[test]
    fn prefixes_are_compared_on_character_boundaries() {
        let acls = Acls::new(vec![topic_acl("é", Prefixed, ALICE, Read, Allow)]);
        assert!(may(&acls, ALICE, Read, "été"));
        // The stored prefix is 2 bytes long, which ends inside the "é" of "aé": that length
        // is skipped rather than sliced (slicing there would panic).
        assert!(!may(&acls, ALICE, Read, "aé"));
        let acls = Acls::new(vec![topic_acl("a", Prefixed, ALICE, Read, Allow)]);
        assert!(!may(&acls, ALICE, Read, "é"), "a 1-byte prefix length inside a 2-byte character");
    }

    #[test]
    fn deny_beats_allow() {
        let acls = Acls::new(vec![
            topic_acl("orders", Literal, ALICE, Read, Allow),
            topic_acl(WILDCARD, Literal, ALICE, Write, Allow),
            topic_acl("ord", Prefixed, ALICE, Read, Deny),
            topic_acl("orders", Literal, ALICE, Write, Deny),
        ]);
        assert!(!may(&acls, ALICE, Read, "orders"), "prefixed DENY over literal ALLOW");
        assert!(!may(&acls, ALICE, Write, "orders"), "literal DENY over wildcard ALLOW");
        assert!(may(&acls, ALICE, Write, "payments"), "the DENY is for orders only");

        let acls = Acls::new(vec![
            topic_acl("orders", Literal, ALICE, All, Allow),
            topic_acl(WILDCARD, Literal, WILDCARD_PRINCIPAL, Write, Deny),
        ]);
        assert!(!may(&acls, ALICE, Write, "orders"), "a DENY for everyone on every topic");
        assert!(may(&acls, ALICE, Read, "orders"));
    }

    #[test]
    fn allows_imply_describe_and_describe_configs() {
        for op in [Read, Write, Delete, Alter, Describe, All] {
            let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, op, Allow)]);
            assert!(may(&acls, ALICE, Describe, "t"), "ALLOW {} grants DESCRIBE", op.name());
        }
        for op in [Create, AlterConfigs, DescribeConfigs, ClusterAction, IdempotentWrite] {
            let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, op, Allow)]);
            assert!(!may(&acls, ALICE, Describe, "t"), "ALLOW {} does not grant DESCRIBE", op.name());
        }
        let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, AlterConfigs, Allow)]);
        assert!(may(&acls, ALICE, DescribeConfigs, "t"));
        assert!(may(&acls, ALICE, AlterConfigs, "t"));
        let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, DescribeConfigs, Allow)]);
        assert!(!may(&acls, ALICE, AlterConfigs, "t"));
        let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, Describe, Allow)]);
        assert!(!may(&acls, ALICE, Read, "t"), "DESCRIBE does not grant READ");
        let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, All, Allow)]);
        for &op in Operation::VALUES {
            assert!(may(&acls, ALICE, op, "t"), "ALLOW ALL grants {}", op.name());
        }
    }

    #[test]
    fn deny_has_no_implications_except_all() {
        let acls = Acls::new(vec![
            topic_acl("t", Literal, ALICE, Read, Allow),
            topic_acl("t", Literal, ALICE, Read, Deny),
            topic_acl("t", Literal, ALICE, AlterConfigs, Allow),
            topic_acl("t", Literal, ALICE, AlterConfigs, Deny),
        ]);
        assert!(!may(&acls, ALICE, Read, "t"));
        assert!(may(&acls, ALICE, Describe, "t"), "DENY READ does not deny DESCRIBE");
        assert!(may(&acls, ALICE, DescribeConfigs, "t"), "DENY ALTER_CONFIGS does not deny DESCRIBE_CONFIGS");

        let acls =
            Acls::new(vec![topic_acl("t", Literal, ALICE, Describe, Allow), topic_acl("t", Literal, ALICE, All, Deny)]);
        assert!(!may(&acls, ALICE, Describe, "t"), "DENY ALL denies DESCRIBE");
    }

    #[test]
    fn super_users_may_do_anything() {
        let cfg = AuthorizerConfig { super_users: vec!["User:admin".to_string()], ..AuthorizerConfig::default() };
        let acls = Acls::new(vec![topic_acl(WILDCARD, Literal, WILDCARD_PRINCIPAL, All, Deny)]);
        assert!(acls.authorize(&cfg, "User:admin", CLIENT, Write, Topic, "orders"));
        assert!(acls.authorize(&cfg, "User:admin", CLIENT, Alter, Cluster, CLUSTER_NAME));
        assert!(!acls.authorize(&cfg, "User:Admin", CLIENT, Write, Topic, "orders"), "compared exactly");
        assert!(!acls.authorize(&cfg, ALICE, CLIENT, Write, Topic, "orders"));
    }

    #[test]
    fn no_acl_found_falls_back_to_the_config() {
        let empty = Acls::default();
        assert!(empty.authorize(&allow_by_default(), ALICE, CLIENT, Write, Topic, "orders"));
        assert!(!empty.authorize(&deny_by_default(), ALICE, CLIENT, Write, Topic, "orders"));

        // An ACL for bob on the topic governs it: alice is refused even when the default allows.
        let acls = Acls::new(vec![topic_acl("orders", Literal, BOB, Read, Allow)]);
        assert!(!acls.authorize(&allow_by_default(), ALICE, CLIENT, Write, Topic, "orders"));
        // So does an ACL for alice for another operation.
        let acls = Acls::new(vec![topic_acl("orders", Prefixed, ALICE, Read, Allow)]);
        assert!(!acls.authorize(&allow_by_default(), ALICE, CLIENT, Write, Topic, "orders"));
        // ACLs on other topics or of other types do not.
        let acls = Acls::new(vec![
            topic_acl("payments", Literal, BOB, Read, Allow),
            acl(Group, "orders", Literal, BOB, Read, Allow),
        ]);
        assert!(acls.authorize(&allow_by_default(), ALICE, CLIENT, Write, Topic, "orders"));
        assert!(!acls.authorize(&deny_by_default(), ALICE, CLIENT, Write, Topic, "orders"));
    }

    #[test]
    fn host_must_match_the_client_address() {
        let mut from_client = topic_acl("t", Literal, ALICE, Read, Allow);
        from_client.host = "10.0.0.1".to_string();
        let acls = Acls::new(vec![from_client]);
        assert!(acls.authorize(&deny_by_default(), ALICE, CLIENT, Read, Topic, "t"));
        assert!(!acls.authorize(&deny_by_default(), ALICE, OTHER_CLIENT, Read, Topic, "t"));
        // A dual-stack listener reports an IPv4 client as IPv4-mapped IPv6.
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        assert!(acls.authorize(&deny_by_default(), ALICE, mapped, Read, Topic, "t"));
        // And an ACL may be written in that form for an IPv4 client.
        let mut written_mapped = topic_acl("t", Literal, ALICE, Read, Allow);
        written_mapped.host = "::ffff:10.0.0.1".to_string();
        let acls = Acls::new(vec![written_mapped]);
        assert!(acls.authorize(&deny_by_default(), ALICE, CLIENT, Read, Topic, "t"));

        // IPv6 written in full matches the client's compressed form.
        let mut v6 = topic_acl("t", Literal, ALICE, Read, Deny);
        v6.host = "0:0:0:0:0:0:0:1".to_string();
        let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, Read, Allow), v6]);
        assert!(!acls.authorize(&deny_by_default(), ALICE, IpAddr::V6(Ipv6Addr::LOCALHOST), Read, Topic, "t"));
        assert!(acls.authorize(&deny_by_default(), ALICE, CLIENT, Read, Topic, "t"));

        // A host name (only possible in a hand-written catalog) matches no client.
        let mut named = topic_acl("t", Literal, ALICE, Read, Allow);
        named.host = "localhost".to_string();
        let acls = Acls::new(vec![named]);
        assert!(!acls.authorize(&deny_by_default(), ALICE, IpAddr::V4(Ipv4Addr::LOCALHOST), Read, Topic, "t"));
    }

    #[test]
    fn wildcard_principal_matches_every_principal() {
        let acls = Acls::new(vec![topic_acl("t", Literal, WILDCARD_PRINCIPAL, Read, Allow)]);
        assert!(may(&acls, ALICE, Read, "t"));
        assert!(may(&acls, crate::auth::ANONYMOUS, Read, "t"));
        let acls = Acls::new(vec![topic_acl("t", Literal, ALICE, Read, Allow)]);
        assert!(!may(&acls, BOB, Read, "t"));
        assert!(!may(&acls, "User:alice2", Read, "t"));
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
            AclBinding::from_wire(rt, name, pt, principal, host, op, perm).expect_err("must be refused")
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
        let e = AclFilter::from_wire(0, None, 1, None, None, 1, 1).unwrap_err();
        assert!(e.contains("resource type filter 0 (UNKNOWN)") && e.contains("ANY (1)"), "{e}");
        assert!(AclFilter::from_wire(1, None, 0, None, None, 1, 1).unwrap_err().contains("0 (UNKNOWN)"));
        assert!(AclFilter::from_wire(1, None, 5, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(1, None, 1, None, None, 0, 1).unwrap_err().contains("operation filter"));
        assert!(AclFilter::from_wire(1, None, 1, None, None, 1, 0).unwrap_err().contains("permission type filter"));
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
        let acls = Acls::new(filter_fixture());
        acls.matching(f).into_iter().map(|b| (b.resource_type, b.resource_name, b.pattern)).collect()
    }

    fn topic_filter(name: Option<&str>, pattern: PatternFilter) -> AclFilter {
        AclFilter { resource_type: Some(Topic), resource_name: name.map(str::to_string), pattern, ..AclFilter::ANY }
    }

    #[test]
    fn filter_any_matches_every_pattern_and_an_equal_name() {
        assert_eq!(Acls::new(filter_fixture()).matching(&AclFilter::ANY), filter_fixture());
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
        let acls = Acls::new(filter_fixture());
        let bob = AclFilter { principal: Some(BOB.to_string()), ..AclFilter::ANY };
        assert_eq!(acls.matching(&bob).len(), 2);
        let wildcard = AclFilter { principal: Some(WILDCARD_PRINCIPAL.to_string()), ..AclFilter::ANY };
        assert!(acls.matching(&wildcard).is_empty(), "User:* finds wildcard ACLs, not everyone's");
        let denies = AclFilter { permission: Some(Deny), ..AclFilter::ANY };
        assert_eq!(acls.matching(&denies), vec![topic_acl(WILDCARD, Literal, BOB, Write, Deny)]);
        let describes = AclFilter { operation: Some(Describe), ..AclFilter::ANY };
        assert_eq!(acls.matching(&describes), vec![topic_acl("ord", Prefixed, ALICE, Describe, Allow)]);
        let host = AclFilter { host: Some("10.0.0.1".to_string()), ..AclFilter::ANY };
        assert!(acls.matching(&host).is_empty());
        let groups = AclFilter { resource_type: Some(Group), ..AclFilter::ANY };
        assert_eq!(acls.matching(&groups), vec![acl(Group, "orders", Literal, ALICE, Read, Allow)]);
    }

    #[test]
    fn snapshots_drop_duplicates_and_can_be_changed() {
        let a = topic_acl("orders", Literal, ALICE, Read, Allow);
        let b = topic_acl("orders", Literal, BOB, Read, Allow);
        let acls = Acls::new(vec![a.clone(), b.clone(), a.clone()]);
        assert_eq!(acls.bindings(), [a.clone(), b.clone()]);

        // What the controller stores after a CreateAcls and a DeleteAcls, indexed anew.
        let acls = Acls::new(vec![a.clone(), b.clone(), topic_acl("pay", Prefixed, ALICE, Write, Allow)]);
        assert_eq!(acls.bindings().len(), 3);
        assert!(may(&acls, ALICE, Write, "payments"), "the index is rebuilt");

        let alice = AclFilter { principal: Some(ALICE.to_string()), ..AclFilter::ANY };
        let acls = Acls::new(acls.bindings().iter().filter(|x| !alice.matches(x)).cloned().collect());
        assert_eq!(acls.bindings(), [b]);
        assert!(!may(&acls, ALICE, Read, "orders"));
        assert!(may(&acls, BOB, Read, "orders"));
    }

    #[test]
    fn authorize_any_follows_kafkas_resource_type_rules() {
        let cfg = deny_by_default();
        let any = |acls: &[AclBinding], op| Acls::new(acls.to_vec()).authorize_any(&cfg, ALICE, CLIENT, op, Topic);

        assert!(!any(&[], Write));
        assert!(Acls::default().authorize_any(&allow_by_default(), ALICE, CLIENT, Write, Topic));

        let allow_orders = topic_acl("orders", Literal, ALICE, Write, Allow);
        assert!(any(std::slice::from_ref(&allow_orders), Write));
        assert!(any(&[topic_acl("orders", Literal, ALICE, All, Allow)], Write));
        assert!(!any(std::slice::from_ref(&allow_orders), Read), "another operation");
        assert!(!any(&[topic_acl("orders", Literal, ALICE, Read, Allow)], Describe), "no implications");
        assert!(!any(&[topic_acl("orders", Literal, BOB, Write, Allow)], Write), "another principal");
        assert!(!any(&[acl(Group, "orders", Literal, ALICE, Write, Allow)], Write), "another type");
        let mut elsewhere = allow_orders.clone();
        elsewhere.host = "10.0.0.2".to_string();
        assert!(!any(&[elsewhere], Write), "another host");

        // A DENY cancels an ALLOW only if it covers everything the ALLOW allows.
        let deny = |name, pattern| topic_acl(name, pattern, ALICE, Write, Deny);
        assert!(!any(&[allow_orders.clone(), deny("orders", Literal)], Write));
        assert!(!any(&[allow_orders.clone(), deny("ord", Prefixed)], Write));
        assert!(!any(&[allow_orders.clone(), deny("orders", Prefixed)], Write));
        assert!(any(&[allow_orders.clone(), deny("orders2", Prefixed)], Write));
        assert!(any(&[allow_orders.clone(), deny("payments", Literal)], Write));
        let allow_prefix = topic_acl("orders.", Prefixed, ALICE, Write, Allow);
        assert!(any(&[allow_prefix.clone(), deny("orders.", Literal)], Write), "the rest of the prefix");
        assert!(!any(&[allow_prefix.clone(), deny("orders.", Prefixed)], Write));
        assert!(!any(&[allow_prefix.clone(), deny("o", Prefixed)], Write));
        assert!(any(&[allow_prefix.clone(), deny("orders.eu", Prefixed)], Write));
        assert!(any(&[allow_orders.clone(), deny("orders", Literal), allow_prefix.clone()], Write), "one is enough");
        // A DENY READ does not cancel an ALLOW WRITE; a DENY ALL does.
        assert!(any(&[allow_orders.clone(), topic_acl("orders", Literal, ALICE, Read, Deny)], Write));
        assert!(!any(&[allow_orders.clone(), topic_acl("orders", Literal, ALICE, All, Deny)], Write));

        // The wildcard: a DENY refuses whatever is allowed, an ALLOW grants despite other DENYs.
        let allow_all_topics = topic_acl(WILDCARD, Literal, ALICE, Write, Allow);
        assert!(!any(&[allow_orders.clone(), allow_all_topics.clone(), deny(WILDCARD, Literal)], Write));
        assert!(any(&[allow_all_topics.clone(), deny("o", Prefixed)], Write));
        assert!(!any(&[allow_orders.clone(), topic_acl(WILDCARD, Literal, WILDCARD_PRINCIPAL, All, Deny)], Write));
    }

    #[test]
    fn authorize_any_passes_super_users_and_the_no_acl_default() {
        let deny_everything = Acls::new(vec![topic_acl(WILDCARD, Literal, WILDCARD_PRINCIPAL, All, Deny)]);
        let cfg = AuthorizerConfig { super_users: vec![ALICE.to_string()], allow_everyone_if_no_acl_found: false };
        assert!(deny_everything.authorize_any(&cfg, ALICE, CLIENT, Write, Topic));
        assert!(!deny_everything.authorize_any(&cfg, BOB, CLIENT, Write, Topic));

        // With the allowing default, Kafka lets anyone through as long as some resource has no
        // ACL: ACLs for bob on named topics leave alice allowed...
        let bobs = Acls::new(vec![topic_acl("orders", Literal, BOB, Write, Allow)]);
        assert!(bobs.authorize_any(&allow_by_default(), ALICE, CLIENT, Write, Topic));
        assert!(!bobs.authorize_any(&deny_by_default(), ALICE, CLIENT, Write, Topic));
        // ...but an ACL on every topic governs them all.
        let bobs = Acls::new(vec![topic_acl(WILDCARD, Literal, BOB, Write, Allow)]);
        assert!(!bobs.authorize_any(&allow_by_default(), ALICE, CLIENT, Write, Topic));
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
