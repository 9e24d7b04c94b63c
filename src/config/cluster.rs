//! The cluster settings parsed and checked together: a broker is a cluster member when
//! `controller_quorum_voters` is set, and then it needs `cluster_listen` and must be one of
//! the voters. With neither set it runs alone, exactly as without a cluster.

use std::net::SocketAddr;
use std::time::Duration;

use super::parse::resolve_addr;
use super::{bad, Config, ConfigError};

/// The cluster settings of a broker that is a member of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// Where this broker's cluster listener binds.
    pub listen: SocketAddr,
    /// The metadata quorum's voters: (node id, cluster address), in the order given.
    pub voters: Vec<(i32, SocketAddr)>,
    pub tick: Duration,
    pub election_ticks: usize,
    pub replica_lag: Duration,
    /// How often leaderships go back to preferred replicas (None: never).
    pub rebalance: Option<Duration>,
}

impl ClusterSettings {
    /// Every member's node id.
    pub fn members(&self) -> Vec<i32> {
        self.voters.iter().map(|(id, _)| *id).collect()
    }
}

/// `controller_quorum_voters` parsed: `ID@HOST:PORT` separated by commas.
fn parse_voters(s: &str) -> Result<Vec<(i32, SocketAddr)>, ConfigError> {
    const SETTING: &str = "controller_quorum_voters";
    let mut out: Vec<(i32, SocketAddr)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part.split_once('@').ok_or_else(|| bad(SETTING, format!("`{part}` is not ID@HOST:PORT")))?;
        let id: i32 = id
            .parse()
            .ok()
            .filter(|id| *id >= 0)
            .ok_or_else(|| bad(SETTING, format!("`{id}` in `{part}` is not a node id (0 or more)")))?;
        let addr = resolve_addr(SETTING, addr)?;
        if out.iter().any(|(other, _)| *other == id) {
            return Err(bad(SETTING, format!("node {id} is listed twice")));
        }
        if out.iter().any(|(_, other)| *other == addr) {
            return Err(bad(SETTING, format!("two voters share the address {addr}")));
        }
        out.push((id, addr));
    }
    Ok(out)
}

impl Config {
    /// The cluster settings, or `None` for a broker that runs alone.
    pub fn cluster(&self) -> Result<Option<ClusterSettings>, ConfigError> {
        let voters = parse_voters(&self.controller_quorum_voters)?;
        let listen = match &self.cluster_listen {
            Some(l) => Some(resolve_addr("cluster_listen", l)?),
            None => None,
        };
        let listen = match (listen, voters.is_empty()) {
            (None, true) => return Ok(None),
            (Some(_), true) => {
                return Err(bad(
                    "controller_quorum_voters",
                    "cluster_listen is set but no voters are: list the cluster's brokers as ID@HOST:PORT,...",
                ))
            }
            (None, false) => {
                return Err(bad(
                    "cluster_listen",
                    "a cluster member needs its broker-to-broker listener: set it to this broker's \
                     address in controller_quorum_voters",
                ))
            }
            (Some(l), false) => l,
        };
        let Some((_, mine)) = voters.iter().find(|(id, _)| *id == self.node_id) else {
            return Err(bad(
                "controller_quorum_voters",
                format!(
                    "node_id {} is not among the voters; every broker of a cluster is a voter of its \
                     metadata quorum (brokers outside it are not supported yet)",
                    self.node_id
                ),
            ));
        };
        if mine.port() != listen.port() {
            // Legitimate behind a proxy or a port mapping: peers dial the voter address.
            tracing::warn!(%listen, voter = %mine, "cluster_listen binds another port than controller_quorum_voters gives this broker: peers must reach it through that address");
        }
        if self.raft_tick_ms == 0 || self.raft_tick_ms > 10_000 {
            return Err(bad("raft_tick_ms", "must be between 1 and 10000"));
        }
        if self.raft_election_ticks < 3 || self.raft_election_ticks > 1000 {
            return Err(bad("raft_election_ticks", "must be between 3 and 1000 (a leader heartbeats every tick)"));
        }
        Ok(Some(ClusterSettings {
            listen,
            voters,
            tick: Duration::from_millis(self.raft_tick_ms),
            election_ticks: self.raft_election_ticks as usize,
            replica_lag: Duration::from_millis(self.replica_lag_time_max_ms),
            rebalance: self
                .auto_leader_rebalance_enable
                .then(|| Duration::from_secs(self.leader_imbalance_check_interval_seconds)),
        }))
    }

    pub(super) fn validate_cluster(&self) -> Result<(), ConfigError> {
        let cluster = self.cluster()?;
        let brokers = cluster.as_ref().map_or(1, |c| c.voters.len());
        if self.default_replication_factor == 0 || self.default_replication_factor as usize > brokers {
            return Err(bad(
                "default_replication_factor",
                format!("must be between 1 and the number of brokers ({brokers})"),
            ));
        }
        if self.min_insync_replicas == 0 {
            return Err(bad("min_insync_replicas", "must be at least 1"));
        }
        if self.replica_lag_time_max_ms == 0 {
            return Err(bad("replica_lag_time_max_ms", "must be at least 1"));
        }
        if self.leader_imbalance_check_interval_seconds == 0 {
            return Err(bad(
                "leader_imbalance_check_interval_seconds",
                "must be at least 1 (auto_leader_rebalance_enable = false turns it off)",
            ));
        }
        if let Some(rack) = &self.broker_rack {
            if rack.is_empty() {
                return Err(bad("broker_rack", "must not be empty (leave it unset for no rack)"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(voters: &str, listen: Option<&str>, node_id: i32) -> Config {
        Config {
            controller_quorum_voters: voters.into(),
            cluster_listen: listen.map(String::from),
            node_id,
            ..Config::default()
        }
    }

    #[test]
    fn a_broker_without_cluster_settings_runs_alone() {
        assert_eq!(Config::default().cluster().unwrap(), None);
    }

    #[test]
    fn voters_parse_in_kafka_form() {
        let c = member("1@127.0.0.1:9101, 2@127.0.0.1:9102,3@127.0.0.1:9103", Some("127.0.0.1:9102"), 2);
        let s = c.cluster().unwrap().unwrap();
        assert_eq!(s.members(), vec![1, 2, 3]);
        assert_eq!(s.listen, "127.0.0.1:9102".parse().unwrap());
        assert_eq!(s.tick, Duration::from_millis(100));
        c.validate().unwrap();
    }

    #[test]
    fn inconsistent_cluster_settings_are_refused_with_the_setting_to_fix() {
        let cases = [
            (member("1@127.0.0.1:9101", None, 1), "cluster_listen"),
            (member("", Some("127.0.0.1:9101"), 1), "controller_quorum_voters"),
            (member("1@127.0.0.1:9101", Some("127.0.0.1:9101"), 2), "controller_quorum_voters"),
            (member("1@127.0.0.1:9101,1@127.0.0.1:9102", Some("127.0.0.1:9101"), 1), "controller_quorum_voters"),
            (member("x@127.0.0.1:9101", Some("127.0.0.1:9101"), 1), "controller_quorum_voters"),
            (member("1@127.0.0.1", Some("127.0.0.1:9101"), 1), "controller_quorum_voters"),
        ];
        for (c, setting) in cases {
            assert_eq!(c.validate().unwrap_err().setting, setting, "{c:?}");
        }
        let c = Config { default_replication_factor: 2, ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "default_replication_factor", "one broker holds one copy");
        let c = Config { raft_election_ticks: 1, ..member("1@127.0.0.1:9101", Some("127.0.0.1:9101"), 1) };
        assert_eq!(c.validate().unwrap_err().setting, "raft_election_ticks");
        let c = Config { leader_imbalance_check_interval_seconds: 0, ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "leader_imbalance_check_interval_seconds");
        let off =
            Config { auto_leader_rebalance_enable: false, ..member("1@127.0.0.1:9101", Some("127.0.0.1:9101"), 1) };
        assert_eq!(off.cluster().unwrap().unwrap().rebalance, None, "turned off");
        let on = member("1@127.0.0.1:9101", Some("127.0.0.1:9101"), 1).cluster().unwrap().unwrap();
        assert_eq!(on.rebalance, Some(std::time::Duration::from_secs(300)), "Kafka's default interval");
    }
}
