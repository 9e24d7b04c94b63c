//! ACLs and SCRAM credentials.

use super::records::Record;
use super::requests::{CredentialChange, Failure};
use super::{plan, Controller};
use crate::auth::acl::{AclBinding, AclFilter};
use crate::protocol::ErrorCode;

impl Controller {
    pub fn create_acls(&mut self, bindings: &[AclBinding]) -> Result<(), Failure> {
        let records = bindings.iter().map(|acl| Record::AddAcl { acl: acl.clone() }).collect();
        self.commit(records)?;
        for b in bindings {
            tracing::info!(acl = ?b, "created ACL");
        }
        Ok(())
    }

    /// Deletes the ACLs each filter matches; returns, per filter, what it deleted. Each
    /// filter is matched against the ACLs as they were before the request, as in Kafka: an
    /// ACL two filters match is listed under both (and removed once).
    pub fn delete_acls(&mut self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, Failure> {
        let before = &self.state.acls;
        let deleted: Vec<Vec<AclBinding>> =
            filters.iter().map(|f| before.iter().filter(|b| f.matches(b)).cloned().collect()).collect();
        let records = before
            .iter()
            .filter(|b| filters.iter().any(|f| f.matches(b)))
            .map(|acl| Record::RemoveAcl { acl: acl.clone() });
        self.commit(records.collect())?;
        for b in deleted.iter().flatten() {
            tracing::info!(acl = ?b, "deleted ACL");
        }
        Ok(deleted)
    }

    /// Applies credential changes; one result per change, in order. A deletion of a
    /// credential that does not exist is RESOURCE_NOT_FOUND, as in Kafka.
    pub fn alter_credentials(&mut self, changes: &[(String, CredentialChange)]) -> Vec<Result<(), Failure>> {
        let planned = plan(&self.state, changes, |cat, (user, change)| match change {
            CredentialChange::Upsert(c) => {
                Ok(((), vec![Record::Credential { user: user.clone(), credential: c.clone() }]))
            }
            CredentialChange::Delete(m) => {
                if !cat.credentials(user).iter().any(|c| c.mechanism == *m) {
                    return Err((
                        ErrorCode::ResourceNotFound,
                        format!("user {user} has no {} credential to delete", m.name()),
                    ));
                }
                Ok(((), vec![Record::RemoveCredential { user: user.clone(), mechanism: *m }]))
            }
        });
        let results = self.finish(planned, false);
        for ((user, change), _) in changes.iter().zip(&results).filter(|(_, r)| r.is_ok()) {
            match change {
                CredentialChange::Upsert(c) => {
                    tracing::info!(%user, mechanism = c.mechanism.name(), "set SCRAM credential")
                }
                CredentialChange::Delete(m) => tracing::info!(%user, mechanism = m.name(), "deleted SCRAM credential"),
            }
        }
        results
    }
}
