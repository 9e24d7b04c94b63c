//! Producer ids for InitProducerId, handed out by the controller shard. Ids are reserved in
//! blocks whose end is persisted (`producer_ids.json`, written atomically) before any id of
//! the block is used, so ids stay unique across restarts (a restart skips the rest of the
//! block).

use std::cell::Cell;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::BrokerError;

const FILE: &str = "producer_ids.json";
const BLOCK: i64 = 1000;

#[derive(Serialize, Deserialize)]
struct Persisted {
    reserved_until: i64,
}

pub struct ProducerIds {
    next: Cell<i64>,
    reserved_until: Cell<i64>,
    path: PathBuf,
}

impl ProducerIds {
    pub fn load(dir: &Path) -> Result<ProducerIds, BrokerError> {
        let path = dir.join(FILE);
        let reserved = match crate::storage::read(&path) {
            Ok(Some(b)) => {
                serde_json::from_slice::<Persisted>(&b)
                    .map_err(|e| BrokerError::Metadata { path: path.clone(), reason: format!("unreadable: {e}") })?
                    .reserved_until
            }
            Ok(None) => 0,
            Err(e) => return Err(BrokerError::Metadata { path, reason: e.to_string() }),
        };
        Ok(ProducerIds { next: Cell::new(reserved), reserved_until: Cell::new(reserved), path })
    }

    pub fn allocate(&self) -> Result<i64, BrokerError> {
        let id = self.next.get();
        if id >= self.reserved_until.get() {
            let until = id + BLOCK;
            self.persist(until)?;
            self.reserved_until.set(until);
        }
        self.next.set(id + 1);
        Ok(id)
    }

    fn persist(&self, reserved_until: i64) -> Result<(), BrokerError> {
        let err = |e: std::io::Error| BrokerError::Metadata { path: self.path.clone(), reason: e.to_string() };
        let bytes = serde_json::to_vec(&Persisted { reserved_until }).expect("serializes");
        crate::storage::write_atomic(&self.path, &bytes, 0o644).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIds::load(dir.path()).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.allocate().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIds::load(dir.path()).unwrap();
        let next = b.allocate().unwrap();
        assert!(next > 2, "a restart never hands out an id again: {next}");
        for _ in 0..(2 * BLOCK) {
            b.allocate().unwrap();
        }
        let c = ProducerIds::load(dir.path()).unwrap();
        assert!(c.allocate().unwrap() > next + 2 * BLOCK);
    }
}
