//! This shard's copy of the catalog: installing a new snapshot (opening the partitions newly
//! homed here, closing and deleting those of deleted topics, new configs, quotas and ACLs
//! for the rest), and handing one to every shard.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use super::mesh::join_all;
use super::{Shard, Tp};
use crate::auth::acl::Acls;
use crate::log::config::Form;
use crate::log::{LogConfig, Partition};
use crate::metadata::Catalog;
use crate::quota::QuotaTable;

impl Shard {
    /// The quotas a catalog's entries give, over the static settings.
    fn quota_table(&self, catalog: &Catalog) -> QuotaTable {
        self.static_quotas.table(&catalog.client_quotas)
    }

    /// A topic's effective log settings: the broker's static ones, the catalog's dynamic
    /// broker defaults over them, then the topic's own configs. `__consumer_offsets` rolls at
    /// `offsets_topic_segment_bytes` (its configs are fixed at creation; this one follows the
    /// setting), so that compaction, which never touches the active segment, keeps it small.
    pub fn topic_log_config(&self, catalog: &Catalog, name: &str, configs: &BTreeMap<String, String>) -> LogConfig {
        let mut cfg = self.broker_log_config(catalog).with_stored(Form::Topic, configs);
        if name == crate::group::offsets::TOPIC {
            cfg.segment_bytes = self.config.offsets_topic_segment_bytes;
        }
        cfg
    }

    /// The broker-wide log defaults: static settings, then the dynamic cluster-wide
    /// defaults, then this broker's own dynamic configs.
    pub fn broker_log_config(&self, catalog: &Catalog) -> LogConfig {
        crate::controller::broker_log_config(&self.log_config, catalog)
    }

    /// Installs a catalog snapshot: opens partitions newly homed here, closes and deletes
    /// those of deleted topics. Older snapshots than the current one are ignored; snapshots
    /// are installed one at a time.
    pub async fn apply_catalog(self: &Rc<Self>, catalog: Arc<Catalog>) {
        // One at a time: two snapshots applied at once would both find a new partition
        // missing across their awaits and open it twice, two writers on one log.
        let Ok(_turn) = self.applying.acquire_permit(1).await else { return };
        if catalog.version < self.catalog.borrow().version {
            return;
        }
        self.retire_partitions(&catalog).await;
        let mut wanted = Vec::new();
        let node = self.config.node_id;
        for t in catalog.topics.values() {
            for (p, &home) in t.homes.iter().enumerate() {
                let tp = Tp { topic: t.id, partition: p as i32 };
                // In a cluster a broker holds only the partitions it has a replica of.
                let mine = !t.replicated() || t.holders_of(tp.partition).contains(&node);
                if home == self.id.0 && mine && !self.logs.borrow().contains_key(&tp) {
                    wanted.push((t.name.clone(), tp));
                }
            }
        }
        // Partitions that stay get their topic's current configs (they, or the dynamic broker
        // defaults under them, may have changed).
        for (tp, p) in self.logs.borrow().iter() {
            if let Some(t) = catalog.topic_by_id(&tp.topic) {
                p.set_config(self.topic_log_config(&catalog, &t.name, &t.configs));
            }
        }
        for (name, tp) in wanted {
            let topic = &catalog.topics[&name];
            let dir = self.config.data_dir.join(Partition::dir_name(&name, tp.partition));
            if let Err(e) = claim_dir(&dir, topic.id) {
                tracing::error!(topic = %name, partition = tp.partition, "cannot open partition: {e}");
                continue;
            }
            let cfg = self.topic_log_config(&catalog, &name, &topic.configs);
            match Partition::open(&name, tp.partition, dir, cfg, self.probe.clone()).await {
                Ok(p) if topic.replicated() => {
                    let Some(cluster) = self.cluster() else {
                        tracing::error!(topic = %name, "a replicated topic on a broker that is not a cluster member");
                        continue;
                    };
                    match cluster.open_group(topic, tp, p.clone()).await {
                        Ok(_) => {
                            self.logs.borrow_mut().insert(tp, p);
                        }
                        Err(e) => {
                            tracing::error!(topic = %name, partition = tp.partition, "cannot start the replica: {e}")
                        }
                    }
                }
                Ok(p) => match p.start_at_stored_start().await {
                    Ok(()) => {
                        self.logs.borrow_mut().insert(tp, p);
                    }
                    Err(e) => tracing::error!(topic = %name, partition = tp.partition, "cannot open partition: {e}"),
                },
                Err(e) => tracing::error!(topic = %name, partition = tp.partition, "cannot open partition: {e}"),
            }
        }
        if let Some(cluster) = self.cluster() {
            cluster.set_throttles(&catalog, self.count);
        }
        if self.catalog.borrow().client_quotas != catalog.client_quotas {
            self.quotas.set_table(self.quota_table(&catalog));
        }
        if self.acls.borrow().bindings() != catalog.acls.as_slice() {
            *self.acls.borrow_mut() = Rc::new(Acls::new(catalog.acls.clone()));
        }
        *self.catalog.borrow_mut() = catalog;
        self.probe.partitions(self.logs.borrow().len());
    }

    /// Closes and deletes this shard's partitions that `catalog` no longer has here.
    async fn retire_partitions(self: &Rc<Self>, catalog: &Catalog) {
        let node = self.config.node_id;
        // Partitions of deleted topics, and replicas a finished reassignment moved away (no
        // longer in the partition's raft configuration, so raft counts on nothing here).
        let held = |tp: &Tp| {
            catalog
                .topic_by_id(&tp.topic)
                .is_some_and(|t| !t.replicated() || t.holders_of(tp.partition).contains(&node))
        };
        let gone: Vec<(Tp, Rc<Partition>)> =
            self.logs.borrow().iter().filter(|(tp, _)| !held(tp)).map(|(tp, p)| (*tp, p.clone())).collect();
        for (tp, p) in gone {
            if catalog.topic_by_id(&tp.topic).is_some() {
                tracing::info!(topic = %p.topic, partition = p.index, "the replica moved away: deleting it here");
            }
            self.tell_other_shards(move |c| c.forget_view(&tp));
            self.logs.borrow_mut().remove(&tp);
            let closed = match self.cluster().and_then(|c| c.remove_group(&tp)) {
                Some(g) => g.stop().await, // closes the log too
                None => p.close().await,
            };
            if let Err(e) = closed {
                tracing::warn!(topic = %p.topic, partition = p.index, "closing deleted partition: {e}");
            }
            if let Err(e) = p.delete_files() {
                tracing::warn!(topic = %p.topic, partition = p.index, "deleting partition files: {e}");
            }
        }
    }

    /// `retire_partitions` on its own, for the first step of `broadcast_catalog`.
    async fn retire_for(self: &Rc<Self>, catalog: Arc<Catalog>) {
        let Ok(_turn) = self.applying.acquire_permit(1).await else { return };
        if catalog.version >= self.catalog.borrow().version {
            self.retire_partitions(&catalog).await;
        }
    }

    /// Sends a catalog snapshot to every shard (this one included) and waits until all
    /// have applied it. Every shard first closes and deletes what the snapshot removes, and
    /// only then does any shard open what it adds: a topic deleted and created again under
    /// its name may get a partition on another shard, in the same directory, and its files
    /// must be gone before it is opened there.
    pub async fn broadcast_catalog(self: &Rc<Self>, catalog: Arc<Catalog>) {
        let others = |retire: bool| {
            let catalog = catalog.clone();
            (0..self.count).filter(|s| *s != self.id.0).map(move |shard| {
                let catalog = catalog.clone();
                self.call(shard, move |here| async move {
                    match retire {
                        true => here.retire_for(catalog).await,
                        false => here.apply_catalog(catalog).await,
                    }
                })
            })
        };
        join_all(others(true)).await;
        self.retire_for(catalog.clone()).await;
        join_all(others(false)).await;
        self.apply_catalog(catalog).await;
    }
}

/// The file in a partition's directory naming the topic (by id) whose records it holds.
const TOPIC_ID_FILE: &str = "topic-id";

/// Makes `dir` the directory of a partition of topic `id`. One left by a deleted topic of
/// the same name (a stop between the deletion's commit and the removal of its files) is
/// removed first: its records are not the new topic's. A directory without the file (from
/// before the file was written) is taken as the topic's.
fn claim_dir(dir: &std::path::Path, id: uuid::Uuid) -> std::io::Result<()> {
    let file = dir.join(TOPIC_ID_FILE);
    match std::fs::read_to_string(&file) {
        Ok(held) if held.trim() == id.to_string() => return Ok(()),
        Ok(held) => {
            tracing::warn!(dir = %dir.display(), held = held.trim(), "removing the files of a deleted topic of the same name");
            crate::storage::remove_dir_all(dir)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    crate::storage::create_dir_all(dir)?;
    crate::storage::write_atomic(&file, id.to_string().as_bytes(), 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_directory_left_by_a_deleted_topic_of_the_same_name_is_emptied_before_use() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("t-0");
        let (old, new) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        claim_dir(&dir, old).unwrap();
        std::fs::write(dir.join("00000000000000000000.log"), b"old records").unwrap();
        claim_dir(&dir, old).unwrap();
        assert!(dir.join("00000000000000000000.log").exists(), "the topic's own files stay");
        claim_dir(&dir, new).unwrap();
        assert!(!dir.join("00000000000000000000.log").exists(), "the deleted topic's records are gone");
        assert_eq!(std::fs::read_to_string(dir.join(TOPIC_ID_FILE)).unwrap(), new.to_string());
        // A directory from before the file existed is taken as it is.
        let legacy = root.path().join("u-0");
        std::fs::create_dir(&legacy).unwrap();
        std::fs::write(legacy.join("00000000000000000000.log"), b"kept").unwrap();
        claim_dir(&legacy, new).unwrap();
        assert!(legacy.join("00000000000000000000.log").exists());
    }
}
