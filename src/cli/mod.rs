//! Subcommands of the `ringbroker` binary besides running the broker: admin tools that work
//! over the Kafka protocol against any Kafka-compatible broker, and the OS tuner. Each
//! subcommand owns its arguments and returns the process exit code (0 ok, 1 failed,
//! 2 bad usage).

pub mod acl;
mod common;
pub mod consume;
pub mod consumer_protocol;
pub mod dev_cluster;
mod fetcher;
pub mod group;
pub mod member;
pub mod output;
pub mod partitioner;
mod partitions;
pub mod produce;
mod record_format;
pub mod topic;
pub mod user;

use clap::{Parser, Subcommand};

/// The `ringbroker` binary's command line: a subcommand, or the broker's flags.
#[derive(Debug, Parser)]
#[command(
    name = "ringbroker",
    version,
    about = "Kafka-compatible broker, thread-per-core on io_uring",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Without a subcommand, ringbroker runs the broker.
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub flags: crate::config::Flags,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, list, describe, delete topics and change their configs
    Topic(topic::TopicArgs),
    /// Send records, one per line of stdin or files
    Produce(produce::ProduceArgs),
    /// Print records, by partition or as a member of a consumer group
    Consume(consume::ConsumeArgs),
    /// List and describe consumer groups, reset their offsets
    Group(group::GroupArgs),
    /// Set, delete and list users' SCRAM credentials
    User(user::UserArgs),
    /// Create, list and delete ACLs
    Acl(acl::AclArgs),
    /// Check, fix (as root) or script the OS settings the broker runs best with
    Tune(crate::tune::TuneArgs),
    /// Start a cluster of brokers on this machine (consecutive ports, own data directories)
    DevCluster(dev_cluster::DevClusterArgs),
}

/// Runs a subcommand and returns the process exit code.
pub fn run(command: Command) -> i32 {
    match command {
        Command::Topic(a) => exit_code(topic::run(a)),
        Command::Produce(a) => exit_code(produce::run(a)),
        Command::Consume(a) => exit_code(consume::run(a)),
        Command::Group(a) => exit_code(group::run(a)),
        Command::User(a) => exit_code(user::run(a)),
        Command::Acl(a) => exit_code(acl::run(a)),
        Command::Tune(a) => crate::tune::run(a),
        Command::DevCluster(a) => exit_code(dev_cluster::run(a)),
    }
}

/// The admin commands' errors go to stderr with their causes; the exit code is 1 (clap
/// exits with 2 on bad usage before a command runs).
fn exit_code(result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}
