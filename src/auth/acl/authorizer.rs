//! The authorizer's decision (`Acls::authorize`) over an indexed snapshot of every ACL.
//!
//! **The decision**, in Kafka's order:
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
//! **Cost.** Every Produce and Fetch asks, so `Acls` is built once per change into an
//! immutable index that each shard reads without a lock: per resource type, a map from
//! literal name to rules, the `*` rules, and a map from prefix to rules together with the
//! distinct prefix lengths, so a name's prefixes are found by one lookup per length that
//! exists. Hosts are parsed to `IpAddr` at build time. A decision allocates nothing.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use super::model::{
    AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType, WILDCARD, WILDCARD_PRINCIPAL,
};

/// The name Kafka's `authorizeByResourceType` asks the ordinary question about before
/// looking at the ACLs of the type: a stand-in for "a resource no ACL was written for".
const PROBE_NAME: &str = "hardcode";

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
    use super::super::fixtures::{acl, topic_acl, ALICE, BOB};
    use super::super::CLUSTER_NAME;
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    use Operation::*;
    use PatternType::{Literal, Prefixed};
    use Permission::{Allow, Deny};
    use ResourceType::{Cluster, Group, Topic};

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const OTHER_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

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
}
