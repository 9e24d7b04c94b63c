//! The catalog: names, topic ids, partition counts, each partition's home shard, and
//! per-topic configs; dynamic broker configs and client quotas; and the security metadata:
//! ACLs and users' SCRAM credentials. The controller (`controller`) is its only writer: a
//! catalog is what the metadata log's records make, and `catalog.json` is its snapshot,
//! written atomically (temp file, fsync, rename, fsync the directory). Every shard reads an
//! immutable copy without locks.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{BrokerError, MetadataFault};

pub const CATALOG_FILE: &str = "catalog.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub id: Uuid,
    /// Home shard of each partition, by partition index.
    pub homes: Vec<usize>,
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
    /// In a cluster, each partition's replicas (node ids, the preferred leader first), by
    /// partition index; empty for a broker that runs alone, which holds every partition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<Vec<i32>>,
    /// The voters a partition's raft group began with, for partitions whose replicas have
    /// been reassigned since (the others began with `replicas`). A replica added later
    /// starts from them and replays the membership changes after them from the log.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "by_partition")]
    pub first_voters: BTreeMap<i32, Vec<i32>>,
    /// Reassignments under way: each partition's target replicas (the preferred leader
    /// first). The partition's leader moves its raft group there; `replicas` changes when
    /// it has.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "by_partition")]
    pub reassigning: BTreeMap<i32, Vec<i32>>,
    /// Brokers of targets a reassignment had before it was cancelled or given another
    /// target: the raft group may already have moved to them, so they keep their replicas
    /// (and count as holders) until the reassignment completes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "by_partition")]
    pub retiring: BTreeMap<i32, Vec<i32>>,
}

/// Maps keyed by partition, written as lists of [partition, value] pairs: JSON object keys
/// are strings, which the metadata records (an internally tagged enum, read through serde's
/// buffered form) cannot read back as numbers.
mod by_partition {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer, V: Serialize>(m: &BTreeMap<i32, V>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        d: D,
    ) -> Result<BTreeMap<i32, V>, D::Error> {
        Ok(Vec::<(i32, V)>::deserialize(d)?.into_iter().collect())
    }
}

impl TopicMeta {
    pub fn partitions(&self) -> i32 {
        self.homes.len() as i32
    }

    /// Whether the topic's partitions are replicated with raft (cluster mode).
    pub fn replicated(&self) -> bool {
        !self.replicas.is_empty()
    }

    /// Partition `p`'s replicas; empty if unreplicated or out of range.
    pub fn replicas_of(&self, p: i32) -> &[i32] {
        usize::try_from(p).ok().and_then(|p| self.replicas.get(p)).map_or(&[], Vec::as_slice)
    }

    /// The voters partition `p`'s raft group began with.
    pub fn first_voters_of(&self, p: i32) -> &[i32] {
        self.first_voters.get(&p).map_or_else(|| self.replicas_of(p), Vec::as_slice)
    }

    /// The brokers that hold a replica of partition `p`: its replicas and, while it is
    /// reassigned, the target's, in Kafka's order (the target first, then those leaving).
    pub fn holders_of(&self, p: i32) -> Vec<i32> {
        let mut all = self.reassigning.get(&p).cloned().unwrap_or_default();
        let retiring = self.retiring.get(&p).map_or(&[][..], Vec::as_slice);
        for &r in self.replicas_of(p).iter().chain(retiring) {
            if !all.contains(&r) {
                all.push(r);
            }
        }
        all
    }
}

/// One address a broker serves clients on: a listener's name and what it advertises.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

/// A cluster member as it registered with the metadata quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub node_id: i32,
    pub endpoints: Vec<Endpoint>,
    #[serde(default)]
    pub rack: Option<String>,
}

impl BrokerRegistration {
    /// The address this broker gives clients of the listener named `listener`.
    pub fn endpoint(&self, listener: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.listener == listener)
    }
}

/// The quota values (Kafka's keys: `producer_byte_rate`, ...) set for one entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaSetting {
    pub entity: crate::quota::QuotaEntity,
    pub values: BTreeMap<String, f64>,
}

/// The key of cluster-wide settings among per-broker ones.
pub const ALL_BROKERS: i32 = -1;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Catalog {
    pub cluster_id: String,
    /// Grows with every change, so a shard can ignore a snapshot older than the one it has.
    pub version: u64,
    pub topics: BTreeMap<String, TopicMeta>,
    /// Dynamic cluster-wide broker defaults (AlterConfigs / IncrementalAlterConfigs on the
    /// default BROKER resource, name ""), by Kafka's broker config name (`log.retention.ms`):
    /// under every topic's own configs.
    #[serde(default)]
    pub broker_defaults: BTreeMap<String, String>,
    /// Dynamic configs of this broker (the BROKER resource named by its node id), over the
    /// cluster-wide ones.
    #[serde(default)]
    pub broker_configs: BTreeMap<String, String>,
    /// Replication throttle rates set on brokers (`log::config::REPLICATION_RATES`), bytes
    /// per second, by node id; the cluster-wide ones under `ALL_BROKERS`. Kept apart from
    /// `broker_configs`, which every member applies as its own: a rate is one broker's.
    #[serde(default)]
    pub replication_rates: BTreeMap<i32, BTreeMap<String, u64>>,
    /// The end of the block of producer ids reserved so far: ids below it may have been handed
    /// out, so a restart starts there.
    #[serde(default)]
    pub producer_ids_reserved: i64,
    /// The index of the last metadata-log entry this catalog includes (see `controller`).
    #[serde(default)]
    pub applied: u64,
    /// Client quotas set at run time (AlterClientQuotas), by entity.
    #[serde(default)]
    pub client_quotas: Vec<QuotaSetting>,
    /// ACLs (CreateAcls / DeleteAcls); every shard builds its authorizer index from these.
    #[serde(default)]
    pub acls: Vec<crate::auth::acl::AclBinding>,
    /// SCRAM credentials by user (salted and hashed: a password is never stored).
    #[serde(default)]
    pub scram: BTreeMap<String, Vec<crate::auth::scram::ScramCredential>>,
    /// Hex key from which unknown users get stable fake SCRAM salts (so a client cannot
    /// tell a missing user from a wrong password); made at first start, kept across restarts.
    #[serde(default)]
    pub auth_secret: String,
    /// In a cluster, its brokers as they registered, by node id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    #[serde(skip)]
    by_id: HashMap<Uuid, String>,
}

/// The metadata quorum's own log. Its directory sits beside the partitions' directories, so
/// no topic may take the name (Kafka refuses it too): a topic's replicas would open the
/// quorum's files as theirs.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// Why a topic name is unusable (Kafka's rules: 1–249 of `[a-zA-Z0-9._-]`, not `.`/`..`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicNameError {
    #[error("topic name must be 1 to 249 characters, got {0}")]
    Length(usize),
    #[error("topic name cannot be '.' or '..'")]
    Dots,
    #[error("topic name {name:?} contains {bad:?}; allowed are ASCII letters, digits, '.', '_' and '-'")]
    Character { name: String, bad: char },
}

pub fn check_topic_name(name: &str) -> Result<(), TopicNameError> {
    if name.is_empty() || name.len() > 249 {
        return Err(TopicNameError::Length(name.len()));
    }
    if name == "." || name == ".." {
        return Err(TopicNameError::Dots);
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(TopicNameError::Character { name: name.to_string(), bad });
    }
    Ok(())
}

/// Why a topic of this name cannot be created, beyond `check_topic_name`.
pub fn check_creatable(name: &str) -> Result<(), String> {
    check_topic_name(name).map_err(|e| e.to_string())?;
    if name == METADATA_TOPIC {
        return Err(format!("Creation of internal topic {METADATA_TOPIC} is prohibited."));
    }
    Ok(())
}

impl Catalog {
    /// Replication rate `name` of broker `node`: its own, else the cluster-wide one.
    pub fn replication_rate(&self, node: i32, name: &str) -> Option<u64> {
        let of = |n: i32| self.replication_rates.get(&n).and_then(|r| r.get(name)).copied();
        of(node).or_else(|| of(ALL_BROKERS))
    }

    pub fn new_cluster() -> Catalog {
        Catalog { cluster_id: random_cluster_id(), auth_secret: random_secret(), ..Catalog::default() }
    }

    /// The key behind unknown users' fake salts.
    pub fn auth_secret(&self) -> [u8; 32] {
        let mut key = [0u8; 32];
        for (i, b) in key.iter_mut().enumerate() {
            *b = self.auth_secret.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).unwrap_or(0);
        }
        key
    }

    /// A user's SCRAM credentials (empty for an unknown user).
    pub fn credentials(&self, user: &str) -> Vec<crate::auth::scram::ScramCredential> {
        self.scram.get(user).cloned().unwrap_or_default()
    }

    /// Marks a change so shards take the new snapshot (its version is newer).
    pub fn bump(&mut self) {
        self.version += 1;
    }

    fn reindex(&mut self) {
        self.by_id = self.topics.values().map(|t| (t.id, t.name.clone())).collect();
    }

    pub fn topic(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&TopicMeta> {
        self.by_id.get(id).and_then(|n| self.topics.get(n))
    }

    /// Home shards for `n` new partitions, each on the shard that homes the fewest so far.
    fn balanced_homes(&self, n: u32, shards: usize) -> Vec<usize> {
        let mut load = vec![0usize; shards.max(1)];
        for t in self.topics.values() {
            for &h in &t.homes {
                if let Some(l) = load.get_mut(h) {
                    *l += 1;
                }
            }
        }
        (0..n)
            .map(|_| {
                let (shard, _) = load.iter().enumerate().min_by_key(|(i, l)| (**l, *i)).expect("a shard");
                load[shard] += 1;
                shard
            })
            .collect()
    }

    /// A new topic id, unused and not nil.
    fn new_topic_id(&self) -> Uuid {
        let mut id = Uuid::new_v4();
        while self.by_id.contains_key(&id) || id.is_nil() {
            id = Uuid::new_v4();
        }
        id
    }

    /// A new topic with a fresh id, unreplicated until the controller places its replicas.
    fn new_topic(&self, name: &str, homes: Vec<usize>, configs: BTreeMap<String, String>) -> TopicMeta {
        TopicMeta {
            name: name.to_string(),
            id: self.new_topic_id(),
            homes,
            configs,
            replicas: Vec::new(),
            first_voters: BTreeMap::new(),
            reassigning: BTreeMap::new(),
            retiring: BTreeMap::new(),
        }
    }

    /// A topic to add (not added): each partition on the shard that currently homes the
    /// fewest, and a fresh id.
    pub fn plan_topic(
        &self,
        name: &str,
        partitions: u32,
        shards: usize,
        configs: BTreeMap<String, String>,
    ) -> TopicMeta {
        let homes = self.balanced_homes(partitions, shards);
        self.new_topic(name, homes, configs)
    }

    /// An internal topic to add, partition `i` homed on shard `i % shards` so every shard
    /// hosts its share (`__consumer_offsets`).
    pub fn plan_internal_topic(
        &self,
        name: &str,
        partitions: u32,
        shards: usize,
        configs: BTreeMap<String, String>,
    ) -> TopicMeta {
        let homes = (0..partitions as usize).map(|i| i % shards.max(1)).collect();
        self.new_topic(name, homes, configs)
    }

    /// The topic grown to `total` partitions, the new ones on the least loaded shards (not
    /// stored); `None` if there is no such topic or it already has as many.
    pub fn plan_partitions(&self, name: &str, total: u32, shards: usize) -> Option<TopicMeta> {
        let t = self.topics.get(name)?;
        let have = t.homes.len() as u32;
        if total <= have {
            return None;
        }
        let mut grown = t.clone();
        grown.homes.extend(self.balanced_homes(total - have, shards));
        Some(grown)
    }

    /// Adds a topic or replaces it (its partitions grew).
    pub fn put_topic(&mut self, topic: TopicMeta) {
        self.topics.insert(topic.name.clone(), topic);
        self.version += 1;
        self.reindex();
    }

    /// Replaces a topic's own configs; `false` if there is no such topic.
    pub fn set_topic_configs(&mut self, name: &str, configs: BTreeMap<String, String>) -> bool {
        let Some(t) = self.topics.get_mut(name) else { return false };
        t.configs = configs;
        self.version += 1;
        true
    }

    pub fn remove_topic(&mut self, name: &str) -> Option<TopicMeta> {
        let t = self.topics.remove(name)?;
        self.version += 1;
        self.reindex();
        Some(t)
    }

    /// Loads the catalog snapshot from `dir`, or starts a new cluster there.
    pub fn load_or_create(dir: &Path) -> Result<Catalog, BrokerError> {
        let path = dir.join(CATALOG_FILE);
        let err = |source: MetadataFault| BrokerError::Metadata { path: path.clone(), source };
        let mut cat = match crate::storage::read(&path) {
            Ok(Some(bytes)) => serde_json::from_slice::<Catalog>(&bytes).map_err(|e| err(e.into()))?,
            Ok(None) => {
                let c = Catalog::new_cluster();
                c.persist(dir)?;
                c
            }
            Err(e) => return Err(err(e.into())),
        };
        if cat.auth_secret.len() != 64 {
            // Catalogs written before authentication existed.
            cat.auth_secret = random_secret();
            cat.persist(dir)?;
        }
        cat.reindex();
        Ok(cat)
    }

    /// Fits partition homes to `shards`: a catalog written by a broker with more shards keeps
    /// its homes modulo the current count.
    pub fn fit_homes(&mut self, shards: usize) {
        for t in self.topics.values_mut() {
            for h in &mut t.homes {
                if *h >= shards {
                    tracing::warn!(topic = %t.name, old = *h, new = *h % shards, "shard count changed: partition moves to another home shard");
                    *h %= shards;
                }
            }
        }
    }

    /// Writes the catalog atomically (see `storage::write_atomic`).
    pub fn persist(&self, dir: &Path) -> Result<(), BrokerError> {
        let path = dir.join(CATALOG_FILE);
        let bytes = serde_json::to_vec_pretty(self).expect("catalog serializes");
        // Owner-only: the catalog holds users' SCRAM keys and the fake-salt secret.
        crate::storage::write_atomic(&path, &bytes, 0o600)
            .map_err(|e| BrokerError::Metadata { path: path.clone(), source: e.into() })
    }
}

fn random_secret() -> String {
    crate::auth::scram::random_bytes(32).iter().map(|b| format!("{b:02x}")).collect()
}

fn random_cluster_id() -> String {
    // Kafka cluster ids are 22 characters of URL-safe base64 of 16 random bytes.
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let v = Uuid::new_v4().as_u128();
    (0..22).map(|i| ALPHABET[((v >> (i * 6)) & 63) as usize] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_spread_over_shards_by_count() {
        let mut c = Catalog::new_cluster();
        let a = c.plan_topic("a", 3, 2, BTreeMap::new());
        assert_eq!(a.homes, vec![0, 1, 0]);
        c.put_topic(a);
        let b = c.plan_topic("b", 3, 2, BTreeMap::new());
        assert_eq!(b.homes, vec![1, 0, 1]);
        c.put_topic(b);
        let grown = c.plan_partitions("a", 5, 2).unwrap();
        assert_eq!(grown.homes, vec![0, 1, 0, 0, 1], "new partitions go to the least loaded shards");
        assert!(c.plan_partitions("a", 3, 2).is_none());
        let id = c.topic("a").unwrap().id;
        assert_eq!(c.topic_by_id(&id).unwrap().name, "a");
    }

    #[test]
    fn the_catalog_survives_a_reload_and_keeps_homes() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Catalog::load_or_create(dir.path()).unwrap();
        let t = c.plan_topic("orders", 4, 2, BTreeMap::new());
        c.put_topic(t);
        c.persist(dir.path()).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(CATALOG_FILE)).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "the catalog holds credentials: owner-only");
        let back = Catalog::load_or_create(dir.path()).unwrap();
        assert_eq!(back.cluster_id, c.cluster_id);
        assert_eq!(back.topic("orders"), c.topic("orders"));
        assert!(back.topic_by_id(&c.topic("orders").unwrap().id).is_some());
        let mut fewer = Catalog::load_or_create(dir.path()).unwrap();
        fewer.fit_homes(1);
        assert!(fewer.topic("orders").unwrap().homes.iter().all(|&h| h == 0));
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(check_topic_name("orders.v1_x-2").is_ok());
        assert!(check_topic_name("").is_err());
        assert!(check_topic_name("..").is_err());
        assert!(check_topic_name("a/b").is_err());
        assert!(check_topic_name(&"x".repeat(250)).is_err());
        assert!(check_creatable("orders").is_ok());
        assert!(check_creatable(METADATA_TOPIC).is_err());
        assert!(check_creatable("a/b").is_err());
    }
}
