//! Whole-config validation: every setting in range and the settings consistent with each
//! other, each refusal naming the setting and saying what to change.

use super::cpu_list::parse_cpu_list;
use super::parse::{resolve_addr, split_host_port};
use super::{bad, bad_because, ClientAuth, Config, ConfigError, FlushPolicy};

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        resolve_addr("listen", &self.listen)?;
        if let Some(a) = &self.advertise {
            let (host, port) = split_host_port("advertise", a)?;
            if host.is_empty() || port == 0 {
                return Err(bad("advertise", format!("`{a}` needs a host and a non-zero port")));
            }
        }
        if let Some(c) = &self.cpus {
            parse_cpu_list(c).map_err(|e| bad_because("cpus", e.to_string(), e))?;
            if self.numa_node.is_some() {
                return Err(bad("cpus", "set either `cpus` or `numa_node`, not both"));
            }
        }
        if self.segment_bytes < 1024 || self.segment_bytes > i32::MAX as u64 {
            return Err(bad("segment_bytes", "must be between 1024 and 2147483647"));
        }
        if self.segment_ms == 0 {
            return Err(bad("segment_ms", "must be at least 1"));
        }
        if self.retention_bytes < -1 || self.retention_ms < -1 {
            return Err(bad("retention_bytes/retention_ms", "must be -1 (unlimited) or positive"));
        }
        if self.index_interval_bytes == 0 {
            return Err(bad("index_interval_bytes", "must be at least 1"));
        }
        if self.max_request_bytes < 1024 {
            return Err(bad("max_request_bytes", "must be at least 1024"));
        }
        if self.message_max_bytes < 64 || self.message_max_bytes > self.max_request_bytes {
            return Err(bad("message_max_bytes", "must be at least 64 and at most max_request_bytes"));
        }
        if self.default_partitions == 0 || self.default_partitions > 100_000 {
            return Err(bad("default_partitions", "must be between 1 and 100000"));
        }
        if self.flush == FlushPolicy::Interval && self.flush_interval_ms == 0 {
            return Err(bad("flush_interval_ms", "must be at least 1 with flush = \"interval\""));
        }
        // A frame is read in pieces of up to 1 MiB past what has arrived: a budget must hold
        // the largest frame plus that, or such a frame could never be read.
        let least = self.max_request_bytes as u64 + (1 << 20) + 4;
        for (name, v) in [
            ("queued_max_request_bytes", self.queued_max_request_bytes),
            ("connection_max_request_bytes", self.connection_max_request_bytes),
        ] {
            if v < least {
                return Err(bad(name, format!("{v} is less than max_request_bytes + 1 MiB ({least}); raise it")));
            }
        }
        if self.max_in_flight_per_connection == 0 {
            return Err(bad("max_in_flight_per_connection", "must be at least 1"));
        }
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms {
            return Err(bad("group_min_session_timeout_ms", "must not exceed group_max_session_timeout_ms"));
        }
        if self.offsets_retention_minutes == 0 || self.offsets_retention_check_interval_ms == 0 {
            return Err(bad("offsets_retention_minutes", "retention and its check interval must be at least 1"));
        }
        if !(0.0..=1.0).contains(&self.log_cleaner_min_cleanable_ratio) {
            return Err(bad("log_cleaner_min_cleanable_ratio", "must be from 0 to 1"));
        }
        if self.log_cleaner_max_compaction_lag_ms == 0 || self.log_cleaner_max_compaction_lag_ms > i64::MAX as u64 {
            return Err(bad("log_cleaner_max_compaction_lag_ms", "must be between 1 and 9223372036854775807"));
        }
        if self.log_cleaner_backoff_ms == 0 {
            return Err(bad("log_cleaner_backoff_ms", "must be at least 1"));
        }
        if self.offsets_topic_segment_bytes < 1024 {
            return Err(bad("offsets_topic_segment_bytes", "must be at least 1024"));
        }
        if self.group_max_size == 0 {
            return Err(bad("group_max_size", "must be at least 1"));
        }
        if self.max_incremental_fetch_session_cache_slots > i32::MAX as u32 {
            return Err(bad("max_incremental_fetch_session_cache_slots", "must be at most 2147483647"));
        }
        if self.min_incremental_fetch_session_eviction_ms == 0
            || self.min_incremental_fetch_session_eviction_ms > i64::MAX as u64
        {
            return Err(bad("min_incremental_fetch_session_eviction_ms", "must be between 1 and 9223372036854775807"));
        }
        if self.node_id < 0 {
            return Err(bad("node_id", "must not be negative"));
        }
        if self.max_connections == 0 {
            return Err(bad("max_connections", "must be at least 1 (2147483647 means no limit)"));
        }
        let overrides = self.connection_ip_overrides()?;
        if self.max_connections_per_ip == 0 && overrides.is_empty() {
            return Err(bad(
                "max_connections_per_ip",
                "0 refuses every client: set it to at least 1, or name the allowed IPs in \
                 max_connections_per_ip_overrides",
            ));
        }
        for (name, v) in [
            ("socket_send_buffer_bytes", self.socket_send_buffer_bytes),
            ("socket_receive_buffer_bytes", self.socket_receive_buffer_bytes),
        ] {
            if v == 0 || v < -1 {
                return Err(bad(name, "must be -1 (the kernel's autotuning) or a positive number of bytes"));
            }
        }
        if self.connections_max_idle_ms == 0 {
            return Err(bad("connections_max_idle_ms", "must be at least 1"));
        }
        if self.quota_producer_byte_rate == 0 || self.quota_consumer_byte_rate == 0 {
            return Err(bad(
                "quota_producer_byte_rate/quota_consumer_byte_rate",
                "must be at least 1 byte per second (9223372036854775807 means no quota)",
            ));
        }
        self.client_quotas()?;
        self.user_quotas()?;
        self.admin_addr()?;
        self.validate_security()?;
        self.validate_cluster()?;
        tracing_subscriber::EnvFilter::try_new(&self.log_level).map_err(|e| {
            let problem = format!("`{}` is not a filter such as `info,ringbroker::net=debug`: {e}", self.log_level);
            bad_because("log_level", problem, e)
        })?;
        Ok(())
    }

    fn validate_security(&self) -> Result<(), ConfigError> {
        let specs = self.listener_specs()?;
        let tls = specs.iter().any(|s| s.protocol.tls());
        let sasl = specs.iter().any(|s| s.protocol.sasl());
        if tls && (self.ssl_certificate_file.is_none() || self.ssl_key_file.is_none()) {
            return Err(bad(
                "ssl_certificate_file",
                "an SSL or SASL_SSL listener needs ssl_certificate_file and ssl_key_file (PEM files)",
            ));
        }
        if self.ssl_client_auth != ClientAuth::None && self.ssl_ca_file.is_none() {
            return Err(bad("ssl_ca_file", "ssl_client_auth needs ssl_ca_file, the CA that signs client certificates"));
        }
        if sasl && self.sasl_mechanisms()?.is_empty() {
            return Err(bad("sasl_enabled_mechanisms", "a SASL listener needs at least one mechanism"));
        }
        self.sasl_mechanisms()?;
        if self.sasl_server_max_receive_size < 1024 {
            return Err(bad("sasl_server_max_receive_size", "must be at least 1024"));
        }
        for u in self.super_user_list() {
            if !u.contains(':') {
                return Err(bad("super_users", format!("`{u}` is not TYPE:NAME, e.g. User:admin")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn bad_settings_name_themselves() {
        let c = Config { listen: "nope".into(), ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "listen");
        let c = Config { segment_bytes: 10, ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "segment_bytes");
    }
}
