//! `ringbroker acl create|list|delete`: ACLs over CreateAcls, DescribeAcls and DeleteAcls,
//! with the options of Kafka's `kafka-acls` (`--allow-principal`, `--operation`, `--topic`,
//! `--resource-pattern-type`, ...). `create` adds every principal × host × operation given on
//! one resource; `list` and `delete` take one filter, whose unset fields match anything.

use anyhow::{bail, Result};
use clap::{ArgGroup, Args, Subcommand};
use serde_json::{json, Value};

use super::common::{check, sb, BrokerArgs, KafkaError};
use super::output::{print_json, Format, Table};
use super::user::PLAINTEXT_NOTE;
use crate::auth::acl::{
    AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, ResourceType, CLUSTER_NAME, WILDCARD,
};
use crate::client::Conn;
use crate::protocol::messages::create_acls_request::AclCreation;
use crate::protocol::messages::delete_acls_request::DeleteAclsFilter;
use crate::protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
};
use crate::protocol::StrBytes;

#[derive(Debug, Args)]
#[command(after_help = PLAINTEXT_NOTE)]
pub struct AclArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Output format
    #[arg(long, value_enum, default_value_t, global = true)]
    format: Format,
    #[command(subcommand)]
    command: AclCommand,
}

#[derive(Debug, Subcommand)]
enum AclCommand {
    /// Add ACLs: one per principal, host and operation given, on one resource
    #[command(group(ArgGroup::new("principals").required(true).multiple(true).args(["allow", "deny"])))]
    #[command(mut_group("Resource", |g| g.required(true)))]
    Create {
        /// Principal to allow, TYPE:NAME, e.g. User:alice; User:* is everyone (repeatable)
        #[arg(long = "allow-principal", value_name = "PRINCIPAL")]
        allow: Vec<String>,
        /// Principal to deny, TYPE:NAME; a DENY wins over any ALLOW (repeatable)
        #[arg(long = "deny-principal", value_name = "PRINCIPAL")]
        deny: Vec<String>,
        /// Operation: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction,
        /// DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens; any
        /// case, IDEMPOTENT_WRITE too (repeatable)
        #[arg(long = "operation", value_name = "OPERATION", required = true, value_parser = parse_operation)]
        operations: Vec<Operation>,
        #[command(flatten)]
        resource: Resource,
        /// literal: the name itself (`*`: every name of the type); prefixed: every name
        /// starting with it
        #[arg(long, value_name = "TYPE", default_value = "literal", value_parser = parse_pattern_type)]
        resource_pattern_type: PatternType,
        /// Client IP address the ACL applies to, `*` for any (repeatable)
        #[arg(long = "host", value_name = "HOST", default_value = WILDCARD)]
        hosts: Vec<String>,
    },
    /// List the ACLs that match a filter (all of them without one)
    List {
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Delete the ACLs that match a filter, and print them
    Delete {
        #[command(flatten)]
        filter: FilterArgs,
        /// Delete every ACL (a delete without any filter is refused without it)
        #[arg(long, conflicts_with_all = ["Resource", "resource_pattern_type", "principal", "host", "operation", "permission"])]
        all: bool,
    },
}

/// The resource an ACL is about; at most one of them.
#[derive(Debug, Args)]
#[group(multiple = false)]
struct Resource {
    /// Topic name (a prefix with --resource-pattern-type prefixed; `*` for every topic)
    #[arg(long, value_name = "NAME")]
    topic: Option<String>,
    /// Consumer group id (a prefix with --resource-pattern-type prefixed; `*` for every group)
    #[arg(long, value_name = "ID")]
    group: Option<String>,
    /// The cluster: cluster-wide operations such as IdempotentWrite, Create (topics), Alter
    #[arg(long)]
    cluster: bool,
    /// Transactional id (a prefix with --resource-pattern-type prefixed; `*` for every id)
    #[arg(long, value_name = "ID")]
    transactional_id: Option<String>,
}

impl Resource {
    fn get(&self) -> Option<(ResourceType, String)> {
        if let Some(t) = &self.topic {
            Some((ResourceType::Topic, t.clone()))
        } else if let Some(g) = &self.group {
            Some((ResourceType::Group, g.clone()))
        } else if self.cluster {
            Some((ResourceType::Cluster, CLUSTER_NAME.to_string()))
        } else {
            self.transactional_id.as_ref().map(|x| (ResourceType::TransactionalId, x.clone()))
        }
    }
}

#[derive(Debug, Args)]
struct FilterArgs {
    #[command(flatten)]
    resource: Resource,
    /// How the resource name matches: any (the default: any pattern type, the same name),
    /// match (every ACL that applies to the named resource: its literal name, `*`, and
    /// prefixes of it), literal, prefixed
    #[arg(long, value_name = "TYPE", value_parser = parse_pattern_filter)]
    resource_pattern_type: Option<PatternFilter>,
    /// Only ACLs of this principal, TYPE:NAME (User:* finds the ACLs written for everyone)
    #[arg(long)]
    principal: Option<String>,
    /// Only ACLs for this host, as written (`*` finds the ACLs for any host)
    #[arg(long)]
    host: Option<String>,
    /// Only ACLs of this operation, as written (All finds ACLs for All only)
    #[arg(long, value_parser = parse_operation)]
    operation: Option<Operation>,
    /// Only ALLOW or only DENY ACLs
    #[arg(long, value_parser = parse_permission)]
    permission: Option<Permission>,
}

impl FilterArgs {
    fn filter(&self) -> AclFilter {
        let (resource_type, resource_name) = self.resource.get().unzip();
        AclFilter {
            resource_type,
            resource_name,
            pattern: self.resource_pattern_type.unwrap_or(PatternFilter::Any),
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation,
            permission: self.permission,
        }
    }
}

/// Kafka's wire code for "any value" in a filter.
const ANY: i8 = 1;
/// The ACL API versions this client builds (v0 has no pattern types).
const ACL_VERSIONS: (i16, i16) = (1, 3);

pub fn run(args: AclArgs) -> Result<()> {
    let mut cluster = args.broker.connect()?;
    let conn = cluster.any();
    match args.command {
        AclCommand::Create { allow, deny, operations, resource, resource_pattern_type, hosts } => {
            let (resource_type, name) = resource.get().expect("clap requires a resource");
            check_operations(resource_type, &operations)?;
            let mut acls: Vec<AclBinding> = Vec::new();
            let principals =
                allow.iter().map(|p| (p, Permission::Allow)).chain(deny.iter().map(|p| (p, Permission::Deny)));
            for (principal, permission) in principals {
                for host in &hosts {
                    for &operation in &operations {
                        let b = AclBinding {
                            resource_type,
                            resource_name: name.clone(),
                            pattern: resource_pattern_type,
                            principal: principal.clone(),
                            host: host.clone(),
                            operation,
                            permission,
                        };
                        if !acls.contains(&b) {
                            acls.push(b);
                        }
                    }
                }
            }
            create(conn, args.format, &acls)
        }
        AclCommand::List { filter } => list(conn, args.format, &filter.filter()),
        AclCommand::Delete { filter, all } => {
            let filter = filter.filter();
            if !all && matches_everything(&filter) {
                bail!(
                    "refusing to delete every ACL: narrow the delete with --topic, --group, --cluster, \
                     --transactional-id, --principal, --host, --operation or --permission, or pass --all"
                );
            }
            delete(conn, args.format, &filter)
        }
    }
}

/// Whether `f` leaves every field open, so it would match every ACL.
fn matches_everything(f: &AclFilter) -> bool {
    let open_pattern = matches!(f.pattern, PatternFilter::Any | PatternFilter::Match);
    open_pattern && AclFilter { pattern: PatternFilter::Any, ..f.clone() } == AclFilter::ANY
}

/// `A-b_C` as `ABC`: names compare in any case, with or without separators.
fn squash(s: &str) -> String {
    s.chars().filter(|c| *c != '_' && *c != '-').map(|c| c.to_ascii_uppercase()).collect()
}

/// `s` as one of `values` by Kafka's name in any case, so that `IdempotentWrite`,
/// `IDEMPOTENT_WRITE` and `idempotent-write` are one operation.
fn by_name<T: Copy>(s: &str, values: &[T], name: fn(T) -> &'static str, what: &str) -> Result<T, String> {
    let wanted = squash(s);
    values.iter().copied().find(|&v| squash(name(v)) == wanted).ok_or_else(|| {
        let names: Vec<&str> = values.iter().map(|&v| name(v)).collect();
        format!("unknown {what} '{s}'; use one of {} (any case)", names.join(", "))
    })
}

fn parse_operation(s: &str) -> Result<Operation, String> {
    by_name(s, Operation::VALUES, Operation::name, "operation")
}

fn parse_permission(s: &str) -> Result<Permission, String> {
    by_name(s, Permission::VALUES, Permission::name, "permission")
}

fn parse_pattern_type(s: &str) -> Result<PatternType, String> {
    by_name(s, PatternType::VALUES, PatternType::name, "resource pattern type")
}

fn parse_pattern_filter(s: &str) -> Result<PatternFilter, String> {
    by_name(s, PatternFilter::VALUES, PatternFilter::name, "resource pattern type")
}

/// The operations an ACL on each resource type can name, besides ALL (Kafka's `kafka-acls`
/// refuses the others: the authorizer never asks about them, so the ACL would never apply).
fn valid_operations(t: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match t {
        ResourceType::Topic => &[Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs],
        ResourceType::Group => &[Read, Describe, Delete],
        ResourceType::Cluster => {
            &[Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe]
        }
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
    }
}

fn check_operations(t: ResourceType, operations: &[Operation]) -> Result<()> {
    let valid = valid_operations(t);
    for &op in operations {
        if op != Operation::All && !valid.contains(&op) {
            let names: Vec<&str> = valid.iter().map(|o| o.name()).collect();
            bail!(
                "an ACL on a {} cannot name operation {}: it would never apply; use {} or ALL",
                t.name(),
                op.name(),
                names.join(", ")
            );
        }
    }
    Ok(())
}

/// An ACL as the broker answered it, each enum under Kafka's name (codes this CLI does not
/// know are shown as `UNKNOWN(code)` rather than dropped).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Acl {
    resource_type: String,
    resource_name: String,
    pattern_type: String,
    principal: String,
    host: String,
    operation: String,
    permission: String,
}

fn named(code: i8, name: Option<&'static str>) -> String {
    name.map_or_else(|| format!("UNKNOWN({code})"), str::to_string)
}

impl Acl {
    fn from_wire(
        resource_type: i8,
        resource_name: &StrBytes,
        pattern_type: i8,
        principal: &StrBytes,
        host: &StrBytes,
        operation: i8,
        permission: i8,
    ) -> Acl {
        Acl {
            resource_type: named(resource_type, ResourceType::from_code(resource_type).map(ResourceType::name)),
            resource_name: resource_name.to_string(),
            pattern_type: named(pattern_type, PatternType::from_code(pattern_type).map(PatternType::name)),
            principal: principal.to_string(),
            host: host.to_string(),
            operation: named(operation, Operation::from_code(operation).map(Operation::name)),
            permission: named(permission, Permission::from_code(permission).map(Permission::name)),
        }
    }

    fn from_binding(b: &AclBinding) -> Acl {
        Acl {
            resource_type: b.resource_type.name().to_string(),
            resource_name: b.resource_name.clone(),
            pattern_type: b.pattern.name().to_string(),
            principal: b.principal.clone(),
            host: b.host.clone(),
            operation: b.operation.name().to_string(),
            permission: b.permission.name().to_string(),
        }
    }

    fn json(&self) -> Value {
        json!({
            "resource_type": self.resource_type,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation,
            "permission": self.permission,
        })
    }

    /// For error messages: `ALLOW User:alice READ from * on TOPIC 'orders' (LITERAL)`.
    fn describe(&self) -> String {
        format!(
            "{} {} {} from {} on {} '{}' ({})",
            self.permission,
            self.principal,
            self.operation,
            self.host,
            self.resource_type,
            self.resource_name,
            self.pattern_type
        )
    }
}

/// Prints ACLs as a table or under `key` in a JSON object (`key` None: a bare JSON array).
fn print_acls(format: Format, key: Option<&str>, acls: &[Acl]) -> Result<()> {
    match format {
        Format::Json => {
            let list = Value::Array(acls.iter().map(Acl::json).collect());
            print_json(&match key {
                Some(k) => Value::Object(serde_json::Map::from_iter([(k.to_string(), list)])),
                None => list,
            })?
        }
        Format::Text => {
            let mut t =
                Table::new(&["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]);
            for a in acls {
                t.row(vec![
                    a.resource_type.clone(),
                    a.resource_name.clone(),
                    a.pattern_type.clone(),
                    a.principal.clone(),
                    a.host.clone(),
                    a.operation.clone(),
                    a.permission.clone(),
                ]);
            }
            t.print()?;
        }
    }
    Ok(())
}

/// A Kafka error code and message the broker answered for an ACL.
type Refusal = (i16, Option<String>);

/// One error per distinct refusal: a refusal of every ACL (SECURITY_DISABLED, an
/// authorization failure) reads once, not once per ACL. Every error but the last goes to
/// stderr; the last is returned.
fn report_failures(failures: Vec<(Refusal, Acl)>, doing: &str) -> Result<()> {
    let mut grouped: Vec<(Refusal, Vec<Acl>)> = Vec::new();
    for (refusal, acl) in failures {
        match grouped.iter_mut().find(|(r, _)| *r == refusal) {
            Some((_, acls)) => acls.push(acl),
            None => grouped.push((refusal, vec![acl])),
        }
    }
    let mut errors: Vec<anyhow::Error> = grouped
        .into_iter()
        .map(|((code, message), acls)| {
            let what = match acls.as_slice() {
                [one] => format!("{doing} ACL {}", one.describe()),
                many => format!("{doing} {} ACLs", many.len()),
            };
            KafkaError { code, what, message }.into()
        })
        .collect();
    let Some(last) = errors.pop() else {
        return Ok(());
    };
    for e in errors {
        eprintln!("error: {e:#}");
    }
    Err(last)
}

fn create(conn: &mut Conn, format: Format, acls: &[AclBinding]) -> Result<()> {
    let v = conn.version(ApiKey::CreateAcls, ACL_VERSIONS.0, ACL_VERSIONS.1)?;
    let mut req = CreateAclsRequest::default();
    for b in acls {
        let mut c = AclCreation::default();
        c.resource_type = b.resource_type.code();
        c.resource_name = sb(&b.resource_name);
        c.resource_pattern_type = b.pattern.code();
        c.principal = sb(&b.principal);
        c.host = sb(&b.host);
        c.operation = b.operation.code();
        c.permission_type = b.permission.code();
        req.creations.push(c);
    }
    let resp: CreateAclsResponse = conn.call(ApiKey::CreateAcls, v, &req)?;
    if resp.results.len() != acls.len() {
        bail!("the broker answered {} results to {} ACL creations", resp.results.len(), acls.len());
    }
    let mut created = Vec::new();
    let mut failures = Vec::new();
    for (b, r) in acls.iter().zip(&resp.results) {
        let acl = Acl::from_binding(b);
        if r.error_code == 0 {
            created.push(acl);
        } else {
            failures.push(((r.error_code, r.error_message.as_ref().map(|m| m.to_string())), acl));
        }
    }
    if !created.is_empty() || failures.is_empty() {
        print_acls(format, Some("created"), &created)?;
    }
    report_failures(failures, "creating")
}

fn list(conn: &mut Conn, format: Format, f: &AclFilter) -> Result<()> {
    let v = conn.version(ApiKey::DescribeAcls, ACL_VERSIONS.0, ACL_VERSIONS.1)?;
    let mut req = DescribeAclsRequest::default();
    req.resource_type_filter = f.resource_type.map_or(ANY, ResourceType::code);
    req.resource_name_filter = f.resource_name.as_deref().map(sb);
    req.pattern_type_filter = f.pattern.code();
    req.principal_filter = f.principal.as_deref().map(sb);
    req.host_filter = f.host.as_deref().map(sb);
    req.operation = f.operation.map_or(ANY, Operation::code);
    req.permission_type = f.permission.map_or(ANY, Permission::code);
    let resp: DescribeAclsResponse = conn.call(ApiKey::DescribeAcls, v, &req)?;
    check(resp.error_code, resp.error_message.as_ref(), "listing ACLs")?;
    let mut acls: Vec<Acl> = resp
        .resources
        .iter()
        .flat_map(|r| {
            r.acls.iter().map(move |a| {
                Acl::from_wire(
                    r.resource_type,
                    &r.resource_name,
                    r.pattern_type,
                    &a.principal,
                    &a.host,
                    a.operation,
                    a.permission_type,
                )
            })
        })
        .collect();
    acls.sort();
    print_acls(format, None, &acls)
}

fn delete(conn: &mut Conn, format: Format, f: &AclFilter) -> Result<()> {
    let v = conn.version(ApiKey::DeleteAcls, ACL_VERSIONS.0, ACL_VERSIONS.1)?;
    let mut d = DeleteAclsFilter::default();
    d.resource_type_filter = f.resource_type.map_or(ANY, ResourceType::code);
    d.resource_name_filter = f.resource_name.as_deref().map(sb);
    d.pattern_type_filter = f.pattern.code();
    d.principal_filter = f.principal.as_deref().map(sb);
    d.host_filter = f.host.as_deref().map(sb);
    d.operation = f.operation.map_or(ANY, Operation::code);
    d.permission_type = f.permission.map_or(ANY, Permission::code);
    let mut req = DeleteAclsRequest::default();
    req.filters.push(d);
    let resp: DeleteAclsResponse = conn.call(ApiKey::DeleteAcls, v, &req)?;
    let Some(r) = resp.filter_results.first() else {
        bail!("the broker's DeleteAcls response answered no filter");
    };
    check(r.error_code, r.error_message.as_ref(), "deleting ACLs")?;
    let mut deleted = Vec::new();
    let mut failures = Vec::new();
    for m in &r.matching_acls {
        let acl = Acl::from_wire(
            m.resource_type,
            &m.resource_name,
            m.pattern_type,
            &m.principal,
            &m.host,
            m.operation,
            m.permission_type,
        );
        if m.error_code == 0 {
            deleted.push(acl);
        } else {
            failures.push(((m.error_code, m.error_message.as_ref().map(|m| m.to_string())), acl));
        }
    }
    deleted.sort();
    match format {
        Format::Text if deleted.is_empty() => {
            if failures.is_empty() {
                eprintln!("No ACL matched the filter; nothing was deleted.");
            }
        }
        _ => print_acls(format, Some("deleted"), &deleted)?,
    }
    report_failures(failures, "deleting")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: AclCommand,
    }

    fn parse(args: &[&str]) -> Result<AclCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("acl").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn the_arguments_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn operations_are_named_in_any_case_with_or_without_separators() {
        for s in ["IdempotentWrite", "IDEMPOTENT_WRITE", "idempotent-write", "idempotentwrite"] {
            assert_eq!(parse_operation(s), Ok(Operation::IdempotentWrite), "{s}");
        }
        assert_eq!(parse_operation("Read"), Ok(Operation::Read));
        assert_eq!(parse_operation("ALL"), Ok(Operation::All));
        let e = parse_operation("Any").unwrap_err();
        assert!(e.contains("READ") && e.contains("DESCRIBE_TOKENS"), "{e}");
        assert_eq!(parse_permission("deny"), Ok(Permission::Deny));
        assert_eq!(parse_pattern_type("Prefixed"), Ok(PatternType::Prefixed));
        assert!(parse_pattern_type("match").is_err(), "MATCH is a filter, not a pattern an ACL can have");
        assert_eq!(parse_pattern_filter("match"), Ok(PatternFilter::Match));
    }

    #[test]
    fn create_needs_a_principal_an_operation_and_exactly_one_resource() {
        let ok = parse(&["create", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"]).unwrap();
        let AclCommand::Create { hosts, resource_pattern_type, .. } = ok else { panic!("{ok:?}") };
        assert_eq!(hosts, vec!["*"]);
        assert_eq!(resource_pattern_type, PatternType::Literal);
        assert!(parse(&["create", "--operation", "Read", "--topic", "t"]).is_err(), "no principal");
        assert!(parse(&["create", "--allow-principal", "User:a", "--topic", "t"]).is_err(), "no operation");
        assert!(parse(&["create", "--allow-principal", "User:a", "--operation", "Read"]).is_err(), "no resource");
        let two = ["create", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t", "--group", "g"];
        assert!(parse(&two).is_err(), "two resources");
    }

    #[test]
    fn delete_all_excludes_filters() {
        assert!(parse(&["delete", "--all"]).is_ok());
        assert!(parse(&["delete", "--all", "--topic", "t"]).is_err());
        assert!(parse(&["delete", "--all", "--principal", "User:a"]).is_err());
        assert!(parse(&["delete", "--all", "--resource-pattern-type", "prefixed"]).is_err());
    }

    fn filter_of(args: &[&str]) -> AclFilter {
        match parse(args).unwrap() {
            AclCommand::List { filter } | AclCommand::Delete { filter, .. } => filter.filter(),
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn only_an_open_filter_matches_everything() {
        assert!(matches_everything(&filter_of(&["delete"])));
        assert!(matches_everything(&filter_of(&["delete", "--resource-pattern-type", "match"])));
        assert!(!matches_everything(&filter_of(&["delete", "--resource-pattern-type", "prefixed"])));
        assert!(!matches_everything(&filter_of(&["delete", "--permission", "deny"])));
        let f = filter_of(&["list", "--cluster", "--operation", "IdempotentWrite"]);
        assert_eq!(f.resource_type, Some(ResourceType::Cluster));
        assert_eq!(f.resource_name.as_deref(), Some(CLUSTER_NAME));
        assert_eq!(f.operation, Some(Operation::IdempotentWrite));
        assert_eq!(f.pattern, PatternFilter::Any);
        assert!(!matches_everything(&f));
    }

    #[test]
    fn operations_must_fit_the_resource_type() {
        assert!(check_operations(ResourceType::Topic, &[Operation::Read, Operation::All]).is_ok());
        assert!(check_operations(ResourceType::Cluster, &[Operation::IdempotentWrite]).is_ok());
        let e = check_operations(ResourceType::Topic, &[Operation::IdempotentWrite]).unwrap_err().to_string();
        assert!(e.contains("TOPIC") && e.contains("IDEMPOTENT_WRITE") && e.contains("READ"), "{e}");
        assert!(check_operations(ResourceType::Group, &[Operation::Write]).is_err());
    }

    #[test]
    fn a_refusal_of_every_acl_is_reported_once() {
        let acl = |p: &str| {
            Acl::from_binding(&AclBinding {
                resource_type: ResourceType::Topic,
                resource_name: "t".into(),
                pattern: PatternType::Literal,
                principal: p.into(),
                host: "*".into(),
                operation: Operation::Read,
                permission: Permission::Allow,
            })
        };
        let why = Some("no authorizer".to_string());
        let e = report_failures(vec![((54, why.clone()), acl("User:a")), ((54, why), acl("User:b"))], "creating")
            .unwrap_err();
        assert_eq!(e.to_string(), "SECURITY_DISABLED (54): creating 2 ACLs: no authorizer");
        let e = report_failures(vec![((42, None), acl("User:a"))], "creating").unwrap_err();
        assert_eq!(e.to_string(), "INVALID_REQUEST (42): creating ACL ALLOW User:a READ from * on TOPIC 't' (LITERAL)");
        assert!(report_failures(Vec::new(), "creating").is_ok());
    }
}
