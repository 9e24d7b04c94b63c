//! ACL and SCRAM credential changes, run on the controller shard like topic changes (see
//! `controller`): change the writable catalog, persist it once, broadcast the snapshot and
//! return once every shard enforces it. A CreateAcls response therefore means every shard
//! already checks requests against the new ACLs.

use std::rc::Rc;
use std::sync::Arc;

use super::Shard;
use crate::auth::acl::{AclBinding, AclFilter};
use crate::auth::scram::{Mechanism, ScramCredential};
use crate::metadata::Catalog;
use crate::protocol::ErrorCode;

pub type Failure = (ErrorCode, String);

/// A change to the credentials of one user and mechanism.
#[derive(Debug, Clone)]
pub enum CredentialChange {
    Upsert(ScramCredential),
    Delete(Mechanism),
}

/// Persists `cat` (restoring `before` on failure) and broadcasts it.
async fn commit(shard: &Rc<Shard>, master: &std::cell::RefCell<Catalog>, before: Catalog) -> Result<(), Failure> {
    {
        let mut cat = master.borrow_mut();
        cat.bump();
        if let Err(e) = cat.persist(&shard.config.data_dir) {
            tracing::error!("cannot persist the catalog: {e}");
            *cat = before;
            return Err((ErrorCode::KafkaStorageError, format!("cannot persist security metadata: {e}")));
        }
    }
    let snapshot = Arc::new(master.borrow().clone());
    shard.broadcast_catalog(snapshot).await;
    Ok(())
}

pub async fn create_acls(shard: &Rc<Shard>, bindings: Vec<AclBinding>) -> Result<(), Failure> {
    let Some(master) = shard.controller_catalog() else {
        return Err((ErrorCode::NotController, "not the controller".into()));
    };
    let before = master.borrow().clone();
    {
        let mut cat = master.borrow_mut();
        for b in &bindings {
            if !cat.acls.contains(b) {
                cat.acls.push(b.clone());
            }
        }
    }
    commit(shard, master, before).await?;
    for b in &bindings {
        tracing::info!(acl = ?b, "created ACL");
    }
    Ok(())
}

/// Deletes the ACLs each filter matches; returns, per filter, what it deleted.
pub async fn delete_acls(shard: &Rc<Shard>, filters: Vec<AclFilter>) -> Result<Vec<Vec<AclBinding>>, Failure> {
    let Some(master) = shard.controller_catalog() else {
        return Err((ErrorCode::NotController, "not the controller".into()));
    };
    let before = master.borrow().clone();
    let mut deleted = Vec::with_capacity(filters.len());
    {
        let mut cat = master.borrow_mut();
        for f in &filters {
            let (gone, kept): (Vec<AclBinding>, Vec<AclBinding>) = cat.acls.drain(..).partition(|b| f.matches(b));
            cat.acls = kept;
            deleted.push(gone);
        }
    }
    if deleted.iter().any(|d| !d.is_empty()) {
        commit(shard, master, before).await?;
        for b in deleted.iter().flatten() {
            tracing::info!(acl = ?b, "deleted ACL");
        }
    }
    Ok(deleted)
}

/// Applies credential changes; one result per change, in order. A deletion of a credential
/// that does not exist is RESOURCE_NOT_FOUND, as in Kafka.
pub async fn alter_credentials(
    shard: &Rc<Shard>,
    changes: Vec<(String, CredentialChange)>,
) -> Vec<Result<(), Failure>> {
    let Some(master) = shard.controller_catalog() else {
        return vec![Err((ErrorCode::NotController, "not the controller".into())); changes.len()];
    };
    let before = master.borrow().clone();
    let mut results = Vec::with_capacity(changes.len());
    {
        let mut cat = master.borrow_mut();
        for (user, change) in &changes {
            let creds = cat.scram.entry(user.clone()).or_default();
            let r = match change {
                CredentialChange::Upsert(c) => {
                    creds.retain(|old| old.mechanism != c.mechanism);
                    creds.push(c.clone());
                    Ok(())
                }
                CredentialChange::Delete(m) => {
                    let had = creds.len();
                    creds.retain(|old| old.mechanism != *m);
                    if creds.len() == had {
                        Err((
                            ErrorCode::ResourceNotFound,
                            format!("user {user} has no {} credential to delete", m.name()),
                        ))
                    } else {
                        Ok(())
                    }
                }
            };
            if creds.is_empty() {
                cat.scram.remove(user);
            }
            results.push(r);
        }
    }
    if results.iter().any(Result::is_ok) {
        if let Err(e) = commit(shard, master, before).await {
            return vec![Err(e); changes.len()];
        }
        for ((user, change), _) in changes.iter().zip(&results).filter(|(_, r)| r.is_ok()) {
            match change {
                CredentialChange::Upsert(c) => {
                    tracing::info!(%user, mechanism = c.mechanism.name(), "set SCRAM credential")
                }
                CredentialChange::Delete(m) => tracing::info!(%user, mechanism = m.name(), "deleted SCRAM credential"),
            }
        }
    }
    results
}
