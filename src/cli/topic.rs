//! `ringbroker topic create|list|describe|delete|alter-config`: topic administration over
//! CreateTopics, Metadata, ListOffsets, DescribeConfigs, DeleteTopics and
//! IncrementalAlterConfigs.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::common::{check, parse_key_value, sb, topic_name, BrokerArgs, KafkaError};
use super::output::{id_list, print_json, Format, Table};
use super::partitions::{self, missing_topic, Topic, EARLIEST, LATEST};
use crate::client::{describe_error, Cluster, Unsupported};
use crate::protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use crate::protocol::messages::delete_topics_request::DeleteTopicState;
use crate::protocol::messages::describe_configs_request::DescribeConfigsResource;
use crate::protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use crate::protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

#[derive(Debug, Args)]
pub struct TopicArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Output format
    #[arg(long, value_enum, default_value_t, global = true)]
    format: Format,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Debug, Subcommand)]
enum TopicCommand {
    /// Create a topic
    Create {
        /// Topic name
        name: String,
        /// Number of partitions [default: the broker's num.partitions]
        #[arg(short, long)]
        partitions: Option<i32>,
        /// Replication factor [default: the broker's default.replication.factor]
        #[arg(short = 'r', long)]
        replicas: Option<i16>,
        /// Topic config KEY=VALUE (repeatable), e.g. -c retention.ms=86400000
        #[arg(short = 'c', long = "config", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// List topics
    List {
        /// Include internal topics such as __consumer_offsets
        #[arg(short, long)]
        internal: bool,
    },
    /// Show partitions (leader, replicas, ISR, log start, high watermark) and configs
    Describe {
        /// Topic names
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Delete topics and their data
    Delete {
        /// Topic names
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Set or remove topic configs (IncrementalAlterConfigs)
    #[command(name = "alter-config")]
    AlterConfig {
        /// Topic name
        name: String,
        /// Set KEY=VALUE (repeatable)
        #[arg(long = "set", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// Remove KEY, back to the broker default (repeatable)
        #[arg(long = "delete")]
        delete: Vec<String>,
    },
}

/// How long the broker may take to create or delete topics.
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// DescribeConfigs resource type of a topic.
const TOPIC_RESOURCE: i8 = 2;

pub fn run(args: TopicArgs) -> Result<()> {
    let mut cluster = args.broker.connect()?;
    let format = args.format;
    match args.command {
        TopicCommand::Create { name, partitions, replicas, configs } => {
            create(&mut cluster, format, &name, partitions, replicas, &configs)
        }
        TopicCommand::List { internal } => list(&mut cluster, format, internal),
        TopicCommand::Describe { names } => describe(&mut cluster, format, &names),
        TopicCommand::Delete { names } => delete(&mut cluster, format, &names),
        TopicCommand::AlterConfig { name, set, delete } => alter_config(&mut cluster, format, &name, &set, &delete),
    }
}

fn create(
    cluster: &mut Cluster,
    format: Format,
    name: &str,
    partitions: Option<i32>,
    replicas: Option<i16>,
    configs: &[(String, String)],
) -> Result<()> {
    let conn = cluster.controller()?;
    let v = conn.version(ApiKey::CreateTopics, 2, 7)?;
    // -1 ("the broker's default") exists from v4; older brokers need numbers.
    let default = |n| if v >= 4 { -1 } else { n };
    let mut t = CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions.unwrap_or(default(1));
    t.replication_factor = replicas.unwrap_or(default(1) as i16);
    for (k, val) in configs {
        let mut c = CreatableTopicConfig::default();
        c.name = sb(k);
        c.value = Some(sb(val));
        t.configs.push(c);
    }
    let mut req = CreateTopicsRequest::default();
    req.topics.push(t);
    req.timeout_ms = ADMIN_TIMEOUT_MS;
    let resp: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, v, &req)?;
    let r = resp.topics.first().context("CreateTopics answered no topic")?;
    check(r.error_code, r.error_message.as_ref(), format_args!("topic '{name}'"))?;
    // v5+ answers the partition count and replication factor the broker chose.
    let partitions = if v >= 5 { r.num_partitions } else { partitions.unwrap_or(-1) };
    let replicas = if v >= 5 { r.replication_factor } else { replicas.unwrap_or(-1) };
    match format {
        Format::Json => print_json(&json!({
            "topic": name,
            "topic_id": (v >= 7).then(|| r.topic_id.to_string()),
            "partitions": partitions,
            "replication_factor": replicas,
        }))?,
        Format::Text => {
            let mut t = Table::new(&["TOPIC", "STATUS", "PARTITIONS", "REPLICAS"]);
            let n = |x: i64| if x < 0 { "default".to_string() } else { x.to_string() };
            t.row(vec![name.to_string(), "created".into(), n(partitions.into()), n(replicas.into())]);
            t.print()?;
        }
    }
    Ok(())
}

fn list(cluster: &mut Cluster, format: Format, internal: bool) -> Result<()> {
    let md = cluster.metadata(None, false)?;
    let mut topics: Vec<Topic> = md
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .map(Topic::from_metadata)
        .filter(|t| internal || !t.internal)
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    match format {
        Format::Json => print_json(&Value::Array(
            topics
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "topic_id": t.topic_id.to_string(),
                        "partitions": t.partition_count(),
                        "replication_factor": t.replication_factor(),
                        "internal": t.internal,
                    })
                })
                .collect(),
        ))?,
        Format::Text => {
            let mut table = Table::new(&["NAME", "PARTITIONS", "REPLICAS"]);
            for t in &topics {
                table.row(vec![t.name.clone(), t.partition_count().to_string(), t.replication_factor().to_string()]);
            }
            table.print()?;
        }
    }
    Ok(())
}

struct ConfigEntry {
    name: String,
    value: Option<String>,
    source: &'static str,
    read_only: bool,
    sensitive: bool,
}

fn describe(cluster: &mut Cluster, format: Format, names: &[String]) -> Result<()> {
    let md = cluster.metadata(Some(names), false)?;
    let mut found = Vec::new();
    let mut failures = Vec::new();
    for name in names {
        match md.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == name)) {
            Some(t) if t.error_code == 0 => found.push(Topic::from_metadata(t)),
            Some(t) => failures.push(missing_topic(t.error_code, name)),
            None => failures.push(anyhow::anyhow!("the broker's Metadata response left out topic '{name}'")),
        }
    }
    let mut configs = describe_configs(cluster, &found)?;
    let mut docs = Vec::new();
    for t in &found {
        let leaders: Vec<(i32, i32)> = t.leaders().into_iter().filter(|&(_, l)| l >= 0).collect();
        let start = partitions::list_offsets(cluster, &t.name, &leaders, EARLIEST)?;
        let end = partitions::list_offsets(cluster, &t.name, &leaders, LATEST)?;
        let entries = configs.remove(&t.name).unwrap_or_default();
        docs.push((t, start, end, entries));
    }
    match format {
        Format::Json => {
            let out: Vec<Value> = docs
                .iter()
                .map(|(t, start, end, entries)| {
                    json!({
                        "name": t.name,
                        "topic_id": t.topic_id.to_string(),
                        "internal": t.internal,
                        "partitions": t.partitions.values().map(|p| json!({
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": p.replicas,
                            "isr": p.isr,
                            "offline_replicas": p.offline,
                            "log_start_offset": start.get(&p.partition),
                            "high_watermark": end.get(&p.partition),
                            "error": (p.error_code != 0).then(|| describe_error(p.error_code)),
                        })).collect::<Vec<_>>(),
                        "configs": entries.iter().map(|c| json!({
                            "name": c.name,
                            "value": c.value,
                            "source": c.source,
                            "read_only": c.read_only,
                            "sensitive": c.sensitive,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            print_json(&Value::Array(out))?;
        }
        Format::Text => {
            for (i, (t, start, end, entries)) in docs.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                println!("SUMMARY");
                let mut s = Table::new(&["NAME", "TOPIC-ID", "PARTITIONS", "REPLICAS", "INTERNAL"]);
                s.row(vec![
                    t.name.clone(),
                    t.topic_id.to_string(),
                    t.partition_count().to_string(),
                    t.replication_factor().to_string(),
                    t.internal.to_string(),
                ]);
                s.print()?;
                println!("\nPARTITIONS");
                let mut p = Table::new(&[
                    "PARTITION",
                    "LEADER",
                    "EPOCH",
                    "REPLICAS",
                    "ISR",
                    "LOG-START-OFFSET",
                    "HIGH-WATERMARK",
                ]);
                let off =
                    |m: &std::collections::BTreeMap<i32, i64>, k| m.get(&k).map_or("-".to_string(), i64::to_string);
                for part in t.partitions.values() {
                    p.row(vec![
                        part.partition.to_string(),
                        part.leader.to_string(),
                        part.leader_epoch.to_string(),
                        id_list(&part.replicas),
                        id_list(&part.isr),
                        off(start, part.partition),
                        off(end, part.partition),
                    ]);
                }
                p.print()?;
                println!("\nCONFIGS");
                let mut c = Table::new(&["KEY", "VALUE", "SOURCE"]);
                for e in entries {
                    let value =
                        if e.sensitive { "(sensitive)".to_string() } else { e.value.clone().unwrap_or_default() };
                    c.row(vec![e.name.clone(), value, e.source.to_string()]);
                }
                c.print()?;
            }
        }
    }
    report_failures(failures)
}

/// Configs of each topic, by topic name, sorted by key.
fn describe_configs(
    cluster: &mut Cluster,
    topics: &[Topic],
) -> Result<std::collections::BTreeMap<String, Vec<ConfigEntry>>> {
    let mut out = std::collections::BTreeMap::new();
    if topics.is_empty() {
        return Ok(out);
    }
    let conn = cluster.any();
    let v = conn.version(ApiKey::DescribeConfigs, 1, 4)?;
    let mut req = DescribeConfigsRequest::default();
    for t in topics {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = TOPIC_RESOURCE;
        r.resource_name = sb(&t.name);
        r.configuration_keys = None;
        req.resources.push(r);
    }
    let resp: DescribeConfigsResponse = conn.call(ApiKey::DescribeConfigs, v, &req)?;
    for r in resp.results {
        let name = r.resource_name.to_string();
        check(r.error_code, r.error_message.as_ref(), format_args!("configs of topic '{name}'"))?;
        let mut entries: Vec<ConfigEntry> = r
            .configs
            .iter()
            .map(|c| ConfigEntry {
                name: c.name.to_string(),
                value: c.value.as_ref().map(|v| v.to_string()),
                source: config_source(c.config_source),
                read_only: c.read_only,
                sensitive: c.is_sensitive,
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        out.insert(name, entries);
    }
    Ok(out)
}

/// Kafka's names of DescribeConfigs sources (`ConfigSource` in the Java admin client).
fn config_source(s: i8) -> &'static str {
    match s {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

fn delete(cluster: &mut Cluster, format: Format, names: &[String]) -> Result<()> {
    let conn = cluster.controller()?;
    let v = conn.version(ApiKey::DeleteTopics, 1, 6)?;
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = ADMIN_TIMEOUT_MS;
    for n in names {
        // v6 names topics in a struct (so they can be named by id instead).
        if v >= 6 {
            let mut s = DeleteTopicState::default();
            s.name = Some(topic_name(n));
            req.topics.push(s);
        } else {
            req.topic_names.push(topic_name(n));
        }
    }
    let resp: DeleteTopicsResponse = conn.call(ApiKey::DeleteTopics, v, &req)?;
    let mut deleted = Vec::new();
    let mut failures = Vec::new();
    for n in names {
        let r = resp.responses.iter().find(|r| r.name.as_ref().is_some_and(|x| x.as_str() == n));
        match r {
            None => failures.push(anyhow::anyhow!("the broker's DeleteTopics response left out topic '{n}'")),
            Some(r) if r.error_code == 0 => deleted.push(n.clone()),
            Some(r) => failures.push(
                KafkaError {
                    code: r.error_code,
                    what: format!("topic '{n}'"),
                    message: r.error_message.as_ref().map(|m| m.to_string()),
                }
                .into(),
            ),
        }
    }
    match format {
        Format::Json => print_json(&json!({ "deleted": deleted }))?,
        Format::Text => {
            let mut t = Table::new(&["TOPIC", "STATUS"]);
            for n in &deleted {
                t.row(vec![n.clone(), "deleted".into()]);
            }
            if !t.is_empty() {
                t.print()?;
            }
        }
    }
    report_failures(failures)
}

fn alter_config(
    cluster: &mut Cluster,
    format: Format,
    name: &str,
    set: &[(String, String)],
    delete: &[String],
) -> Result<()> {
    if set.is_empty() && delete.is_empty() {
        bail!("nothing to change: pass --set KEY=VALUE and/or --delete KEY");
    }
    let conn = cluster.any();
    let v = match conn.version(ApiKey::IncrementalAlterConfigs, 0, 1) {
        Ok(v) => v,
        Err(e @ Unsupported { broker: None, .. }) => bail!(
            "{e}, so topic configs cannot be changed on it; \
             set them when the topic is created (`ringbroker topic create {name} -c KEY=VALUE`)"
        ),
        Err(e) => return Err(e.into()),
    };
    let mut res = AlterConfigsResource::default();
    res.resource_type = TOPIC_RESOURCE;
    res.resource_name = sb(name);
    for (k, val) in set {
        let mut c = AlterableConfig::default();
        c.name = sb(k);
        c.config_operation = 0; // SET
        c.value = Some(sb(val));
        res.configs.push(c);
    }
    for k in delete {
        let mut c = AlterableConfig::default();
        c.name = sb(k);
        c.config_operation = 1; // DELETE
        c.value = None;
        res.configs.push(c);
    }
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources.push(res);
    let resp: IncrementalAlterConfigsResponse = conn.call(ApiKey::IncrementalAlterConfigs, v, &req)?;
    let r = resp.responses.first().context("IncrementalAlterConfigs answered no resource")?;
    check(r.error_code, r.error_message.as_ref(), format_args!("configs of topic '{name}'"))?;
    match format {
        Format::Json => print_json(&json!({
            "topic": name,
            "set": set.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "deleted": delete,
        }))?,
        Format::Text => {
            let mut t = Table::new(&["KEY", "CHANGE"]);
            for (k, v) in set {
                t.row(vec![k.clone(), format!("set to {v}")]);
            }
            for k in delete {
                t.row(vec![k.clone(), "deleted".into()]);
            }
            t.print()?;
        }
    }
    Ok(())
}

/// Prints every failure but the last on stderr and returns the last as the error (the exit
/// code is 1 if any topic failed, after the others were still handled).
fn report_failures(mut failures: Vec<anyhow::Error>) -> Result<()> {
    let Some(last) = failures.pop() else {
        return Ok(());
    };
    for f in failures {
        eprintln!("error: {f:#}");
    }
    Err(last)
}
