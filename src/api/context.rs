//! What an API handler may use of the broker: the `Broker` trait. Handlers are generic over
//! it, so the same code runs against a shard (`impl Broker for Rc<Shard>`, below) and
//! against the in-memory fake their unit tests use (`api::fake`), with no socket and no
//! reactor. Its capabilities are the few handlers need: the catalog snapshot and settings,
//! authorization, metrics and quotas, this shard's fetch sessions, partition calls routed to home shards, group calls
//! routed to coordinators, and controller requests.
//!
//! The futures are not `Send`: a handler runs on its connection's shard and never leaves
//! it (DESIGN §1), so the trait's async methods are plain `async fn`.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::oneshot;

use crate::auth::acl::{AclBinding, AclFilter, Acls, Operation, ResourceType as AclResource};
use crate::auth::Session;
use crate::config::Config;
use crate::controller::{
    ConfigChange, CredentialChange, Failure, NewPartitions, NewTopic, QuotaChange, Reassignment, TopicResult,
};
use crate::fetch_session::FetchSessions;
use crate::group::{GroupListing, GroupOp};
use crate::log::{LogConfig, Offsets, ReadOut};
use crate::loggers::Loggers;
use crate::metadata::Catalog;
use crate::metrics::Probe;
use crate::producer::ProducerSummary;
use crate::protocol::ErrorCode;
use crate::quota::ShardQuotas;
use crate::shard::cluster::View;
use crate::shard::controller::ControllerOp;
use crate::shard::{EpochAsk, FetchAsk, OffsetQuery, PartResult, ProduceAcks, Produced, Shard, Share, Tp};

#[allow(async_fn_in_trait)] // handlers' futures stay on their shard: no Send bound wanted
pub trait Broker: Clone + 'static {
    /// The broker's settings (config file, environment, flags).
    fn config(&self) -> &Config;
    /// The static log settings (before topic and dynamic broker configs).
    fn log_config(&self) -> &LogConfig;
    /// SASL mechanisms offered on SASL listeners.
    fn sasl_mechanisms(&self) -> &[String];
    /// The catalog as this shard last applied it.
    fn catalog(&self) -> Arc<Catalog>;

    /// The ACLs of the current catalog, indexed.
    fn acls(&self) -> Rc<Acls>;
    /// Whether ACLs are enforced.
    fn authorizer_enabled(&self) -> bool;
    /// May `session` do `op` on the resource? Always yes without an authorizer.
    fn authorize(&self, session: &Session, op: Operation, resource: AclResource, name: &str) -> bool;
    /// May `session` do `op` on some resource of this type (Kafka's authorizeByResourceType)?
    fn authorize_any(&self, session: &Session, op: Operation, resource: AclResource) -> bool;

    /// This shard's metrics.
    fn probe(&self) -> &Probe;
    /// Client quotas, measured broker-wide.
    fn quotas(&self) -> &ShardQuotas;
    /// This shard's fetch sessions (KIP-227).
    fn fetch_sessions(&self) -> &FetchSessions;
    /// The broker's log levels (the BROKER_LOGGER resource).
    fn loggers(&self) -> &Loggers;
    /// In a cluster, a partition's leadership as this broker knows it (None: alone, or
    /// nothing known yet).
    fn leadership(&self, tp: &Tp) -> Option<View>;
    /// In a cluster, the metadata quorum's leader (None alone; Some(-1) while it has none).
    fn controller_id(&self) -> Option<i32>;

    /// Appends batches on their partitions' home shards; each result once acknowledged as
    /// `acks` asks.
    async fn produce(&self, batches: Share<Bytes>, acks: ProduceAcks) -> Vec<Produced>;
    /// Reads partitions: offsets and a file region each.
    async fn fetch(&self, asks: Share<FetchAsk>) -> Vec<PartResult<ReadOut>>;
    /// Completes when any partition's high watermark passes its offset, or after about `wait`.
    async fn watch(&self, asks: Share<i64>, wait: Duration);
    async fn offsets(&self, partitions: Vec<Tp>) -> Vec<PartResult<Offsets>>;
    /// Moves each log start (-1: to the high watermark); the new log starts. A replicated
    /// partition's answer waits for its raft group to commit the start, at most `timeout`.
    async fn delete_records(&self, asks: Share<i64>, timeout: Duration) -> Vec<PartResult<i64>>;
    /// Each partition's idempotent producers.
    async fn producers(&self, partitions: Vec<Tp>) -> Vec<PartResult<Vec<ProducerSummary>>>;
    /// The (offset, timestamp, leader epoch) each query finds, (-1, -1, -1) for none, asked by
    /// clients believing the leader epochs given (KIP-320).
    async fn list_offsets(&self, asks: Share<(OffsetQuery, i32)>) -> Vec<PartResult<(i64, i64, i32)>>;
    /// OffsetForLeaderEpoch: (epoch, end offset) of each ask's epoch at the leader.
    async fn epoch_end_offsets(&self, asks: Share<EpochAsk>) -> Vec<PartResult<(i32, i64)>>;

    /// Runs the group operation `make(reply)` on the group's coordinator and waits for its
    /// reply; an unreachable coordinator is COORDINATOR_NOT_AVAILABLE.
    async fn group_op<T: Send + 'static>(
        &self,
        group: String,
        make: impl FnOnce(oneshot::Sender<T>) -> GroupOp + Send + 'static,
    ) -> Result<T, ErrorCode>;
    /// ListGroups across every coordinator.
    async fn list_groups(&self, states: Vec<String>) -> Vec<GroupListing>;

    /// Runs the controller request `make(reply)` and waits for its answer, which comes once
    /// every shard has the catalog it produced.
    async fn controller<T: Send + 'static>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ControllerOp + Send + 'static,
    ) -> Result<T, ErrorCode>;

    async fn create_topics(&self, topics: Vec<NewTopic>, validate_only: bool) -> Vec<TopicResult> {
        let n = topics.len();
        let asked = self.controller(move |reply| ControllerOp::CreateTopics { topics, validate_only, reply });
        asked.await.unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    /// Deletes topics by name; one named with a non-nil id only if it still has that id.
    async fn delete_topics(&self, names: Vec<(String, uuid::Uuid)>) -> Vec<Result<uuid::Uuid, ErrorCode>> {
        let n = names.len();
        self.controller(move |reply| ControllerOp::DeleteTopics { names, reply })
            .await
            .unwrap_or_else(|e| vec![Err(e); n])
    }

    async fn create_partitions(&self, asks: Vec<NewPartitions>, validate_only: bool) -> Vec<Result<(), Failure>> {
        let n = asks.len();
        let asked = self.controller(move |reply| ControllerOp::CreatePartitions { asks, validate_only, reply });
        asked.await.unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    async fn alter_configs(&self, changes: Vec<ConfigChange>, validate_only: bool) -> Vec<Result<(), Failure>> {
        let n = changes.len();
        let asked = self.controller(move |reply| ControllerOp::AlterConfigs { changes, validate_only, reply });
        asked.await.unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    async fn alter_client_quotas(&self, changes: Vec<QuotaChange>, validate_only: bool) -> Vec<Result<(), Failure>> {
        let n = changes.len();
        let asked = self.controller(move |reply| ControllerOp::AlterClientQuotas { changes, validate_only, reply });
        asked.await.unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    async fn create_acls(&self, bindings: Vec<AclBinding>) -> Result<(), Failure> {
        let asked = self.controller(move |reply| ControllerOp::CreateAcls { bindings, reply });
        asked.await.unwrap_or_else(|e| Err(unreachable(e)))
    }

    /// Deletes the ACLs each filter matches; returns them, filter by filter.
    async fn delete_acls(&self, filters: Vec<AclFilter>) -> Result<Vec<Vec<AclBinding>>, Failure> {
        let asked = self.controller(move |reply| ControllerOp::DeleteAcls { filters, reply });
        asked.await.unwrap_or_else(|e| Err(unreachable(e)))
    }

    async fn alter_credentials(&self, changes: Vec<(String, CredentialChange)>) -> Vec<Result<(), Failure>> {
        let n = changes.len();
        let asked = self.controller(move |reply| ControllerOp::AlterCredentials { changes, reply });
        asked.await.unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    /// A new producer id from the controller.
    async fn allocate_producer_id(&self) -> Result<i64, ErrorCode> {
        self.controller(move |reply| ControllerOp::AllocateProducerId { reply }).await?
    }

    async fn alter_reassignments(&self, asks: Vec<Reassignment>) -> Vec<Result<(), Failure>> {
        let n = asks.len();
        let asked = self.controller(move |reply| ControllerOp::AlterReassignments { asks, reply });
        asked.await.unwrap_or_else(|e| vec![Err(unreachable(e)); n])
    }

    /// Preferred-leader elections, each answered once the preferred replica leads or `wait`
    /// has passed.
    async fn elect_preferred(&self, asks: Vec<(String, i32)>, wait: Duration) -> Vec<Result<(), Failure>>;
}

/// A controller request that never reached an answer.
fn unreachable(e: ErrorCode) -> Failure {
    (e, "controller unreachable".into())
}

impl Broker for Rc<Shard> {
    fn config(&self) -> &Config {
        &self.config
    }

    fn log_config(&self) -> &LogConfig {
        &self.log_config
    }

    fn sasl_mechanisms(&self) -> &[String] {
        &self.sasl_mechanisms
    }

    fn catalog(&self) -> Arc<Catalog> {
        Shard::catalog(self)
    }

    fn acls(&self) -> Rc<Acls> {
        Shard::acls(self)
    }

    fn authorizer_enabled(&self) -> bool {
        Shard::authorizer_enabled(self)
    }

    fn authorize(&self, session: &Session, op: Operation, resource: AclResource, name: &str) -> bool {
        Shard::authorize(self, session, op, resource, name)
    }

    fn authorize_any(&self, session: &Session, op: Operation, resource: AclResource) -> bool {
        Shard::authorize_any(self, session, op, resource)
    }

    fn probe(&self) -> &Probe {
        &self.probe
    }

    fn quotas(&self) -> &ShardQuotas {
        &self.quotas
    }

    fn loggers(&self) -> &Loggers {
        Loggers::global()
    }

    fn fetch_sessions(&self) -> &FetchSessions {
        &self.fetch_sessions
    }

    fn leadership(&self, tp: &Tp) -> Option<View> {
        self.cluster()?.view(tp)
    }

    fn controller_id(&self) -> Option<i32> {
        Some(self.cluster()?.controller_id())
    }

    async fn produce(&self, batches: Share<Bytes>, acks: ProduceAcks) -> Vec<Produced> {
        Shard::produce(self, batches, acks).await
    }

    async fn fetch(&self, asks: Share<FetchAsk>) -> Vec<PartResult<ReadOut>> {
        Shard::fetch(self, asks).await
    }

    async fn watch(&self, asks: Share<i64>, wait: Duration) {
        Shard::watch(self, asks, wait).await
    }

    async fn offsets(&self, partitions: Vec<Tp>) -> Vec<PartResult<Offsets>> {
        Shard::offsets(self, partitions).await
    }

    async fn delete_records(&self, asks: Share<i64>, timeout: Duration) -> Vec<PartResult<i64>> {
        Shard::delete_records(self, asks, timeout).await
    }

    async fn producers(&self, partitions: Vec<Tp>) -> Vec<PartResult<Vec<ProducerSummary>>> {
        Shard::producers(self, partitions).await
    }

    async fn list_offsets(&self, asks: Share<(OffsetQuery, i32)>) -> Vec<PartResult<(i64, i64, i32)>> {
        Shard::list_offsets(self, asks).await
    }

    async fn epoch_end_offsets(&self, asks: Share<EpochAsk>) -> Vec<PartResult<(i32, i64)>> {
        Shard::epoch_end_offsets(self, asks).await
    }

    async fn group_op<T: Send + 'static>(
        &self,
        group: String,
        make: impl FnOnce(oneshot::Sender<T>) -> GroupOp + Send + 'static,
    ) -> Result<T, ErrorCode> {
        Shard::group_op(self, group, make).await
    }

    async fn list_groups(&self, states: Vec<String>) -> Vec<GroupListing> {
        Shard::list_groups(self, states).await
    }

    async fn controller<T: Send + 'static>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ControllerOp + Send + 'static,
    ) -> Result<T, ErrorCode> {
        Shard::on_controller(self, make).await
    }

    async fn elect_preferred(&self, asks: Vec<(String, i32)>, wait: Duration) -> Vec<Result<(), Failure>> {
        Shard::elect_preferred(self, asks, wait).await
    }
}
