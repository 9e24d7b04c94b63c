//! Subcommands of the `ringbroker` binary besides running the broker: admin tools that work
//! over the Kafka protocol against any Kafka-compatible broker, and the OS tuner. Each
//! subcommand owns its arguments and returns the process exit code (0 ok, 1 failed,
//! 2 bad usage).

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum Command {}

/// Runs a subcommand and returns the process exit code.
pub fn run(command: Command) -> i32 {
    match command {}
}
