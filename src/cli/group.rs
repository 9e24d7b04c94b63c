//! `ringbroker group list|describe|reset-offsets`: consumer groups as Kafka's
//! `kafka-consumer-groups` shows and changes them (ListGroups, DescribeGroups, OffsetFetch,
//! ListOffsets, OffsetCommit).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::common::{check, group_id, BrokerArgs, KafkaError};
use super::consumer_protocol::{self as cp, Assignment};
use super::member::{commit_offsets, committed_offsets};
use super::output::{print_json, Format, Table};
use super::partitions::{self, EARLIEST, LATEST};
use crate::client::Cluster;
use crate::protocol::messages::{
    ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse,
};
use crate::protocol::ErrorCode;

#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Output format
    #[arg(long, value_enum, default_value_t, global = true)]
    format: Format,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Debug, Subcommand)]
enum GroupCommand {
    /// List consumer groups
    List,
    /// Show a group's state and members, and per partition its committed offset and lag
    Describe {
        /// Group id
        group: String,
    },
    /// Move a group's committed offsets; the group must have no active members. Without
    /// --execute, only prints the new offsets
    #[command(name = "reset-offsets")]
    ResetOffsets {
        /// Group id
        group: String,
        /// Topic to reset, TOPIC or TOPIC:P,P,... (repeatable)
        #[arg(long, required = true, value_name = "TOPIC[:PARTITIONS]")]
        topic: Vec<String>,
        #[command(flatten)]
        to: ResetTo,
        /// Commit the new offsets (without it, only the plan is printed)
        #[arg(long)]
        execute: bool,
        /// Only print the plan (the default; accepted for scripts written for Kafka's tool)
        #[arg(long, conflicts_with = "execute")]
        dry_run: bool,
    },
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct ResetTo {
    /// To the log start offset
    #[arg(long)]
    to_earliest: bool,
    /// To the log end offset (skip everything not yet read)
    #[arg(long)]
    to_latest: bool,
    /// To offset N (clamped into the log's range, as Kafka's tool does)
    #[arg(long, value_name = "N")]
    to_offset: Option<i64>,
}

const LIST_GROUPS_VERSIONS: (i16, i16) = (0, 5);
const DESCRIBE_GROUPS_VERSIONS: (i16, i16) = (0, 6);

pub fn run(args: GroupArgs) -> Result<()> {
    let mut cluster = args.broker.connect()?;
    match args.command {
        GroupCommand::List => list(&mut cluster, args.format),
        GroupCommand::Describe { group } => describe(&mut cluster, args.format, &group),
        GroupCommand::ResetOffsets { group, topic, to, execute, dry_run: _ } => {
            reset_offsets(&mut cluster, args.format, &group, &topic, &to, execute)
        }
    }
}

/// Groups are spread over coordinators: ask every broker.
fn list(cluster: &mut Cluster, format: Format) -> Result<()> {
    let mut groups: BTreeMap<String, (String, String)> = BTreeMap::new();
    let ids: Vec<i32> = cluster.brokers().keys().copied().collect();
    for id in ids {
        let conn = cluster.node(id)?;
        let v = conn.version(ApiKey::ListGroups, LIST_GROUPS_VERSIONS.0, LIST_GROUPS_VERSIONS.1)?;
        let resp: ListGroupsResponse = conn.call(ApiKey::ListGroups, v, &ListGroupsRequest::default())?;
        check(resp.error_code, None, format_args!("listing the groups of broker {id}"))?;
        for g in resp.groups {
            // The state is in the answer from v4.
            let state = if v >= 4 { g.group_state.to_string() } else { String::new() };
            groups.insert(g.group_id.to_string(), (state, g.protocol_type.to_string()));
        }
    }
    match format {
        Format::Json => print_json(&Value::Array(
            groups
                .iter()
                .map(|(g, (state, ptype))| json!({"group": g, "state": state, "protocol_type": ptype}))
                .collect(),
        ))?,
        Format::Text => {
            let mut t = Table::new(&["GROUP", "STATE", "PROTOCOL-TYPE"]);
            for (g, (state, ptype)) in &groups {
                t.row(vec![g.clone(), if state.is_empty() { "-".into() } else { state.clone() }, ptype.clone()]);
            }
            t.print()?;
        }
    }
    Ok(())
}

struct GroupMember {
    member_id: String,
    instance_id: Option<String>,
    client_id: String,
    host: String,
    assignment: Assignment,
}

struct GroupInfo {
    coordinator: i32,
    state: String,
    protocol_type: String,
    protocol: String,
    members: Vec<GroupMember>,
}

/// DescribeGroups of one group at its coordinator. A group that does not exist is `Dead`.
fn describe_group(cluster: &mut Cluster, group: &str) -> Result<GroupInfo> {
    let coordinator = cluster.coordinator(group)?;
    let conn = cluster.node(coordinator)?;
    let v = conn.version(ApiKey::DescribeGroups, DESCRIBE_GROUPS_VERSIONS.0, DESCRIBE_GROUPS_VERSIONS.1)?;
    let mut req = DescribeGroupsRequest::default();
    req.groups.push(group_id(group));
    let resp: DescribeGroupsResponse = conn.call(ApiKey::DescribeGroups, v, &req)?;
    let g = resp.groups.into_iter().next().context("DescribeGroups answered no group")?;
    // v6 reports a missing group as GROUP_ID_NOT_FOUND; older versions as state Dead.
    if g.error_code != ErrorCode::GroupIdNotFound.code() {
        check(g.error_code, g.error_message.as_ref(), format_args!("group '{group}'"))?;
    }
    let consumer = g.protocol_type.as_str() == cp::PROTOCOL_TYPE;
    let members = g
        .members
        .into_iter()
        .map(|m| GroupMember {
            member_id: m.member_id.to_string(),
            instance_id: m.group_instance_id.map(|i| i.to_string()),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
            // Only consumer groups carry assignments this tool can read.
            assignment: if consumer {
                cp::decode_assignment(m.member_assignment).unwrap_or_default()
            } else {
                Assignment::new()
            },
        })
        .collect();
    let state = if g.error_code != 0 { "Dead".to_string() } else { g.group_state.to_string() };
    Ok(GroupInfo {
        coordinator,
        state,
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members,
    })
}

/// One partition of `group describe`.
struct OffsetRow<'a> {
    topic: String,
    partition: i32,
    /// The committed offset.
    current: Option<i64>,
    /// The log end offset (high watermark).
    end: Option<i64>,
    owner: Option<&'a GroupMember>,
}

impl OffsetRow<'_> {
    fn lag(&self) -> Option<i64> {
        self.current.zip(self.end).map(|(c, e)| (e - c).max(0))
    }
}

fn describe(cluster: &mut Cluster, format: Format, group: &str) -> Result<()> {
    let info = describe_group(cluster, group)?;
    let committed = committed_offsets(cluster, info.coordinator, group, None)?;
    if info.state == "Dead" && committed.is_empty() {
        return Err(KafkaError {
            code: ErrorCode::GroupIdNotFound.code(),
            what: format!("consumer group '{group}' does not exist"),
            message: None,
        }
        .into());
    }
    // Every partition the group has an offset for or a member reads, with its owner.
    let mut owner: BTreeMap<(String, i32), &GroupMember> = BTreeMap::new();
    for m in &info.members {
        for (t, ps) in &m.assignment {
            for &p in ps {
                owner.insert((t.clone(), p), m);
            }
        }
    }
    let keys: BTreeSet<(String, i32)> = committed.keys().chain(owner.keys()).cloned().collect();
    let mut end: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let topics: BTreeSet<&String> = keys.iter().map(|(t, _)| t).collect();
    for t in topics {
        let Ok(layout) = partitions::topic(cluster, t, false) else {
            continue; // deleted since the commit: no end offset to show
        };
        let wanted: Vec<i32> = keys.iter().filter(|(kt, _)| kt == t).map(|(_, p)| *p).collect();
        let leaders: Vec<(i32, i32)> = layout.leaders().into_iter().filter(|(p, _)| wanted.contains(p)).collect();
        for (p, o) in partitions::list_offsets(cluster, t, &leaders, LATEST)? {
            end.insert((t.clone(), p), o);
        }
    }
    let rows: Vec<OffsetRow<'_>> = keys
        .iter()
        .map(|k| OffsetRow {
            topic: k.0.clone(),
            partition: k.1,
            current: committed.get(k).copied(),
            end: end.get(k).copied(),
            owner: owner.get(k).copied(),
        })
        .collect();
    match format {
        Format::Json => print_json(&json!({
            "group": group,
            "coordinator": info.coordinator,
            "state": info.state,
            "protocol_type": info.protocol_type,
            "protocol": info.protocol,
            "members": info.members.iter().map(|m| json!({
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": m.assignment,
            })).collect::<Vec<_>>(),
            "offsets": rows.iter().map(|r| json!({
                "topic": r.topic,
                "partition": r.partition,
                "current_offset": r.current,
                "log_end_offset": r.end,
                "lag": r.lag(),
                "member_id": r.owner.map(|m| &m.member_id),
            })).collect::<Vec<_>>(),
        }))?,
        Format::Text => {
            let mut s = Table::new(&["GROUP", "COORDINATOR", "STATE", "PROTOCOL", "MEMBERS"]);
            let protocol = if info.protocol.is_empty() { "-".to_string() } else { info.protocol.clone() };
            s.row(vec![
                group.to_string(),
                info.coordinator.to_string(),
                info.state.clone(),
                protocol,
                info.members.len().to_string(),
            ]);
            s.print()?;
            println!();
            let dash = |x: Option<i64>| x.map_or("-".to_string(), |v| v.to_string());
            let mut t = Table::new(&[
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ]);
            for r in &rows {
                let o = r.owner;
                t.row(vec![
                    r.topic.clone(),
                    r.partition.to_string(),
                    dash(r.current),
                    dash(r.end),
                    dash(r.lag()),
                    o.map_or("-".into(), |m| m.member_id.clone()),
                    o.map_or("-".into(), |m| m.host.clone()),
                    o.map_or("-".into(), |m| m.client_id.clone()),
                ]);
            }
            t.print()?;
        }
    }
    Ok(())
}

/// `TOPIC` or `TOPIC:0,1,2`.
fn parse_topic_partitions(s: &str) -> Result<(String, Option<Vec<i32>>)> {
    match s.split_once(':') {
        None => Ok((s.to_string(), None)),
        Some((t, ps)) => {
            let parts = ps
                .split(',')
                .map(|p| {
                    p.trim().parse::<i32>().with_context(|| format!("'{p}' in --topic {s} is not a partition number"))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((t.to_string(), Some(parts)))
        }
    }
}

fn reset_offsets(
    cluster: &mut Cluster,
    format: Format,
    group: &str,
    topics: &[String],
    to: &ResetTo,
    execute: bool,
) -> Result<()> {
    let info = describe_group(cluster, group)?;
    if info.state != "Empty" && info.state != "Dead" {
        // Kafka's tool refuses with these words: members would overwrite the new offsets.
        bail!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {}.",
            info.state
        );
    }
    let mut plan: Vec<(String, BTreeMap<i32, i64>)> = Vec::new();
    for spec in topics {
        let (topic, only) = parse_topic_partitions(spec)?;
        let layout = partitions::topic(cluster, &topic, false)?;
        let leaders: Vec<(i32, i32)> = match &only {
            None => layout.leaders(),
            Some(ps) => {
                for p in ps {
                    if !layout.partitions.contains_key(p) {
                        bail!("topic '{topic}' has partitions 0-{}, not {p}", layout.partition_count() - 1);
                    }
                }
                layout.leaders().into_iter().filter(|(p, _)| ps.contains(p)).collect()
            }
        };
        let offsets = if to.to_earliest {
            partitions::list_offsets(cluster, &topic, &leaders, EARLIEST)?
        } else if to.to_latest {
            partitions::list_offsets(cluster, &topic, &leaders, LATEST)?
        } else {
            let n = to.to_offset.expect("clap requires one --to-* option");
            let start = partitions::list_offsets(cluster, &topic, &leaders, EARLIEST)?;
            let end = partitions::list_offsets(cluster, &topic, &leaders, LATEST)?;
            start.iter().map(|(&p, &s)| (p, n.clamp(s, end[&p]))).collect()
        };
        plan.push((topic, offsets));
    }
    if execute {
        for (topic, offsets) in &plan {
            // Generation -1 and no member id: a commit from outside the group.
            commit_offsets(cluster, info.coordinator, group, -1, "", topic, offsets)?;
        }
    }
    match format {
        Format::Json => print_json(&json!({
            "group": group,
            "executed": execute,
            "offsets": plan.iter().flat_map(|(t, offs)| offs.iter().map(move |(p, o)| json!({
                "topic": t, "partition": p, "new_offset": o,
            }))).collect::<Vec<_>>(),
        }))?,
        Format::Text => {
            let mut t = Table::new(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]);
            for (topic, offs) in &plan {
                for (p, o) in offs {
                    t.row(vec![group.to_string(), topic.clone(), p.to_string(), o.to_string()]);
                }
            }
            t.print()?;
        }
    }
    if !execute {
        eprintln!("Dry run: no offsets were changed. Add --execute to commit these offsets.");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_specs_name_partitions_after_a_colon() {
        assert_eq!(parse_topic_partitions("t").unwrap(), ("t".to_string(), None));
        assert_eq!(parse_topic_partitions("t:0, 2").unwrap(), ("t".to_string(), Some(vec![0, 2])));
        assert!(parse_topic_partitions("t:x").is_err());
    }
}
