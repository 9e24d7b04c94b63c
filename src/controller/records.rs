//! The metadata log's records: each is one fact about the cluster's metadata, decided by the
//! controller before it is logged (a topic's id and partition homes included), so applying a
//! record is pure and deterministic, the same at every replay. A catalog is the result of
//! applying the log's records in order; a snapshot only shortens the replay.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::auth::acl::AclBinding;
use crate::auth::scram::{Mechanism, ScramCredential};
use crate::metadata::{BrokerRegistration, Catalog, QuotaSetting, TopicMeta};
use crate::quota::QuotaEntity;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// A new topic, or one whose partitions grew.
    Topic {
        topic: TopicMeta,
    },
    RemoveTopic {
        name: String,
    },
    TopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    /// The dynamic cluster-wide broker defaults, all of them.
    BrokerDefaults {
        configs: BTreeMap<String, String>,
    },
    /// This broker's dynamic configs, all of them.
    BrokerConfigs {
        configs: BTreeMap<String, String>,
    },
    /// A broker's replication throttle rates (`ALL_BROKERS`: the cluster-wide ones), all of
    /// them.
    ReplicationRates {
        node: i32,
        rates: BTreeMap<String, u64>,
    },
    /// An entity's quotas, all of them; none removes the entity.
    ClientQuota {
        entity: QuotaEntity,
        values: BTreeMap<String, f64>,
    },
    AddAcl {
        acl: AclBinding,
    },
    RemoveAcl {
        acl: AclBinding,
    },
    Credential {
        user: String,
        credential: ScramCredential,
    },
    RemoveCredential {
        user: String,
        mechanism: Mechanism,
    },
    /// Producer ids below this may be handed out.
    ProducerIds {
        reserved_until: i64,
    },
    /// A cluster's identity, written once by the metadata quorum's first leader: every
    /// member tells clients the same cluster id and fakes the same salts.
    Cluster {
        cluster_id: String,
        auth_secret: String,
    },
    /// A cluster member's addresses and rack, as it registered.
    Broker {
        broker: BrokerRegistration,
    },
}

/// Applies one record to a catalog.
pub fn apply(cat: &mut Catalog, record: &Record) {
    match record {
        Record::Topic { topic } => cat.put_topic(topic.clone()),
        Record::RemoveTopic { name } => {
            cat.remove_topic(name);
        }
        Record::TopicConfigs { name, configs } => {
            cat.set_topic_configs(name, configs.clone());
        }
        Record::BrokerDefaults { configs } => {
            cat.broker_defaults = configs.clone();
            cat.bump();
        }
        Record::BrokerConfigs { configs } => {
            cat.broker_configs = configs.clone();
            cat.bump();
        }
        Record::ReplicationRates { node, rates } => {
            match rates.is_empty() {
                true => cat.replication_rates.remove(node),
                false => cat.replication_rates.insert(*node, rates.clone()),
            };
            cat.bump();
        }
        Record::ClientQuota { entity, values } => {
            cat.client_quotas.retain(|s| s.entity != *entity);
            if !values.is_empty() {
                cat.client_quotas.push(QuotaSetting { entity: entity.clone(), values: values.clone() });
                cat.client_quotas.sort_by(|a, b| a.entity.cmp(&b.entity));
            }
            cat.bump();
        }
        Record::AddAcl { acl } => {
            if !cat.acls.contains(acl) {
                cat.acls.push(acl.clone());
            }
            cat.bump();
        }
        Record::RemoveAcl { acl } => {
            cat.acls.retain(|a| a != acl);
            cat.bump();
        }
        Record::Credential { user, credential } => {
            let creds = cat.scram.entry(user.clone()).or_default();
            creds.retain(|c| c.mechanism != credential.mechanism);
            creds.push(credential.clone());
            cat.bump();
        }
        Record::RemoveCredential { user, mechanism } => {
            if let Some(creds) = cat.scram.get_mut(user) {
                creds.retain(|c| c.mechanism != *mechanism);
                if creds.is_empty() {
                    cat.scram.remove(user);
                }
            }
            cat.bump();
        }
        Record::ProducerIds { reserved_until } => {
            cat.producer_ids_reserved = cat.producer_ids_reserved.max(*reserved_until)
        }
        Record::Cluster { cluster_id, auth_secret } => {
            // The first one wins: a second could only come from a leader that had not yet
            // applied the first.
            if cat.cluster_id.is_empty() {
                cat.cluster_id = cluster_id.clone();
                cat.auth_secret = auth_secret.clone();
                cat.bump();
            }
        }
        Record::Broker { broker } => {
            cat.brokers.insert(broker.node_id, broker.clone());
            cat.bump();
        }
    }
}
