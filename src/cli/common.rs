//! What every admin command shares: the broker flag, Kafka errors as the CLI reports them,
//! and small conversions to the codec's string types.

use std::fmt::Display;

use anyhow::Result;
use clap::Args;

use crate::client::{describe_error, Cluster};
use crate::protocol::messages::{GroupId, TopicName};
use crate::protocol::StrBytes;

/// The client id the CLI's requests carry (broker logs and quotas show it).
pub(super) const CLIENT_ID: &str = "ringbroker-cli";

#[derive(Debug, Clone, Args)]
pub(super) struct BrokerArgs {
    /// Brokers to bootstrap from, HOST:PORT[,HOST:PORT...]
    #[arg(short = 'b', long = "brokers", env = "RINGBROKER_BROKERS", default_value = "127.0.0.1:9092", global = true)]
    pub brokers: String,
}

impl BrokerArgs {
    pub(super) fn connect(&self) -> Result<Cluster> {
        Cluster::connect(&self.brokers, CLIENT_ID)
    }
}

/// A Kafka error code answered for `what`, named as Kafka names it, with the broker's
/// message when it sent one: `TOPIC_ALREADY_EXISTS (36): topic 'orders': Topic 'orders'
/// already exists.`
#[derive(Debug)]
pub(super) struct KafkaError {
    pub code: i16,
    pub what: String,
    pub message: Option<String>,
}

impl Display for KafkaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", describe_error(self.code), self.what)?;
        match &self.message {
            Some(m) if !m.is_empty() => write!(f, ": {m}"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for KafkaError {}

/// `Ok` for error code 0, else the named Kafka error.
pub(super) fn check(code: i16, message: Option<&StrBytes>, what: impl Display) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(kafka_error(code, message, what))
}

/// The named Kafka error `code` (non-zero) answered for `what`.
pub(super) fn kafka_error(code: i16, message: Option<&StrBytes>, what: impl Display) -> anyhow::Error {
    KafkaError { code, what: what.to_string(), message: message.map(|m| m.to_string()) }.into()
}

/// `k=v` of `--config`, `--set` and `-H`.
pub(super) fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

pub(super) fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub(super) fn topic_name(s: &str) -> TopicName {
    TopicName(sb(s))
}

pub(super) fn group_id(s: &str) -> GroupId {
    GroupId(sb(s))
}

/// Milliseconds since the Unix epoch (record timestamps).
pub(super) fn now_ms() -> i64 {
    crate::sys::unix_now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_errors_read_like_kafkas() {
        let e = check(36, Some(&sb("Topic 'a' already exists.")), "topic 'a'").unwrap_err();
        assert_eq!(e.to_string(), "TOPIC_ALREADY_EXISTS (36): topic 'a': Topic 'a' already exists.");
        let e = check(3, None, "topic 'b'").unwrap_err();
        assert_eq!(e.to_string(), "UNKNOWN_TOPIC_OR_PARTITION (3): topic 'b'");
        assert!(check(0, None, "x").is_ok());
    }

    #[test]
    fn key_values_split_at_the_first_equals_sign() {
        assert_eq!(parse_key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_key_value("a="), Ok(("a".into(), String::new())));
        assert!(parse_key_value("=b").is_err());
        assert!(parse_key_value("ab").is_err());
    }
}
