//! Partition operations routed to their home shards, a request's partitions at a time: the
//! asks are split by home shard, this shard's share runs in place (no task per partition),
//! and every other shard touched gets one call carrying its whole share and sends one reply.
//! Results come back in the order of the asks.
//!
//! Each operation is a pair: the routing method handlers call (`produce`, `fetch`, ...) and
//! the home half (`serve_*`), which runs on the shard that owns the partitions.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::oneshot;

use super::mesh::{first_of, join_all};
use super::{Shard, Tp};
use crate::cluster::group::Acks;
use crate::log::{Appended, Offsets, Partition, ReadOut, Refusal};
use crate::metrics;
use crate::producer::ProducerSummary;
use crate::protocol::ErrorCode;

pub type PartResult<R> = Result<R, ErrorCode>;

/// A produced batch's result: its offsets once acknowledged, or why it was not.
pub type Produced = Result<Appended, Refusal>;
/// Asks about partitions, each with its partition.
pub type Share<A> = Vec<(Tp, A)>;
/// The home half of an operation: serves one shard's share of the asks.
type Served<R> = Pin<Box<dyn Future<Output = Vec<PartResult<R>>>>>;

/// How a Produce wants its appends acknowledged (Kafka's `acks` and `timeout_ms`).
#[derive(Debug, Clone, Copy)]
pub struct ProduceAcks {
    /// acks=all: a replicated partition answers once the batch is committed and held by
    /// `min.insync.replicas` copies; otherwise after the leader's own write.
    pub all_replicas: bool,
    /// A replicated partition's append not acknowledged by then is REQUEST_TIMED_OUT.
    pub timeout: Duration,
}

/// A fetch of one partition: from `offset`, at most `max_bytes`, by a client that believes
/// the leader epoch is `current_leader_epoch` (-1: no belief).
#[derive(Debug, Clone, Copy)]
pub struct FetchAsk {
    pub offset: i64,
    pub max_bytes: u32,
    pub current_leader_epoch: i32,
}

/// OffsetForLeaderEpoch's ask of a partition: where `epoch` ends, by a client that believes
/// the leader epoch is `current` (-1: no belief).
#[derive(Debug, Clone, Copy)]
pub struct EpochAsk {
    pub current: i32,
    pub epoch: i32,
}

/// A broker alone has leader epoch 0 for every partition: a client that believes in a later
/// one has metadata from elsewhere (UNKNOWN_LEADER_EPOCH, KIP-320).
pub fn alone_epoch(current: i32) -> Result<i32, ErrorCode> {
    match current {
        c if c > 0 => Err(ErrorCode::UnknownLeaderEpoch),
        _ => Ok(0),
    }
}

/// Where `epoch` ends on a broker alone: epoch 0 ends at the log end; any other is unknown.
pub fn alone_epoch_end(epoch: i32, log_end: i64) -> (i32, i64) {
    match epoch {
        0 => (0, log_end),
        _ => (-1, -1),
    }
}

/// What ListOffsets asks of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    /// The high watermark.
    Latest,
    /// The log start.
    Earliest,
    /// Tiered storage's end: there is none, so nothing.
    LatestTiered,
    /// The record with the largest timestamp.
    MaxTimestamp,
    /// The first record at or after this timestamp.
    AtTime(i64),
}

/// The asks grouped by home shard, each with the ask positions it answers; asks for an
/// unknown partition are answered at once.
struct Split<A, R> {
    out: Vec<Option<PartResult<R>>>,
    shares: BTreeMap<usize, (Vec<usize>, Share<A>)>,
}

impl Shard {
    pub(super) fn log(&self, tp: &Tp) -> Result<Rc<Partition>, ErrorCode> {
        if let Some(p) = self.logs.borrow().get(tp) {
            return Ok(p.clone());
        }
        // A partition of the cluster this broker holds no replica of: the client asks the
        // leader once its metadata is fresh.
        match self.catalog.borrow().topic_by_id(&tp.topic) {
            Some(t) if t.replicated() => Err(ErrorCode::NotLeaderOrFollower),
            _ => Err(ErrorCode::UnknownTopicOrPartition),
        }
    }

    /// The partition's log, for serving clients: in a cluster only the serving leader
    /// serves its partition (followers answer NOT_LEADER_OR_FOLLOWER).
    pub(super) fn leader_log(&self, tp: &Tp) -> Result<Rc<Partition>, ErrorCode> {
        self.epoch_checked(tp, -1).map(|(p, _)| p)
    }

    /// `leader_log` for a client that believes the leader epoch is `current` (KIP-320), with
    /// the leader epoch: FENCED_LEADER_EPOCH if it is older, UNKNOWN_LEADER_EPOCH if newer.
    fn epoch_checked(&self, tp: &Tp, current: i32) -> Result<(Rc<Partition>, i32), ErrorCode> {
        let p = self.log(tp)?;
        match self.cluster().and_then(|c| c.group(tp)) {
            Some(g) => {
                g.check_leader_epoch(current)?;
                Ok((p, i32::try_from(g.term()).unwrap_or(i32::MAX)))
            }
            None => Ok((p, alone_epoch(current)?)),
        }
    }

    fn home(&self, tp: &Tp) -> Result<usize, ErrorCode> {
        let cat = self.catalog.borrow();
        let t = cat.topic_by_id(&tp.topic).ok_or(ErrorCode::UnknownTopicOrPartition)?;
        t.homes.get(tp.partition as usize).copied().ok_or(ErrorCode::UnknownTopicOrPartition)
    }

    fn split<A, R>(&self, asks: Share<A>) -> Split<A, R> {
        let mut out: Vec<Option<PartResult<R>>> = (0..asks.len()).map(|_| None).collect();
        let mut shares: BTreeMap<usize, (Vec<usize>, Share<A>)> = BTreeMap::new();
        for (i, (tp, a)) in asks.into_iter().enumerate() {
            match self.home(&tp) {
                Ok(home) => {
                    let (at, share) = shares.entry(home).or_default();
                    at.push(i);
                    share.push((tp, a));
                }
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        Split { out, shares }
    }

    /// `serve` on `home`'s share: in place here, else as one call.
    async fn on_home<A, R, S>(self: &Rc<Self>, home: usize, share: Share<A>, serve: S) -> Vec<PartResult<R>>
    where
        A: Send + 'static,
        R: Send + 'static,
        S: FnOnce(Rc<Shard>, Share<A>) -> Served<R> + Send + 'static,
    {
        if home == self.id.0 {
            return serve(self.clone(), share).await;
        }
        let n = share.len();
        match self.call(home, move |here| serve(here, share)).await {
            Ok(results) => results,
            Err(e) => (0..n).map(|_| Err(e)).collect(),
        }
    }

    /// Runs `serve` on every home shard's share of `asks` at once; results in ask order.
    async fn scatter<A, R, S>(self: &Rc<Self>, asks: Share<A>, serve: S) -> Vec<PartResult<R>>
    where
        A: Send + 'static,
        R: Send + 'static,
        S: FnOnce(Rc<Shard>, Share<A>) -> Served<R> + Send + Copy + 'static,
    {
        let Split { mut out, shares } = self.split(asks);
        let calls = shares.into_iter().map(|(home, (at, share))| async move {
            let results = self.on_home(home, share, serve).await;
            (at, results)
        });
        for (at, results) in join_all(calls).await {
            for (i, r) in at.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        out.into_iter().map(|r| r.unwrap_or(Err(ErrorCode::UnknownTopicOrPartition))).collect()
    }

    /// Runs a synchronous partition operation on each ask's home shard.
    async fn on_partitions<A, R>(
        self: &Rc<Self>,
        asks: Share<A>,
        op: fn(&Partition, A) -> PartResult<R>,
    ) -> Vec<PartResult<R>>
    where
        A: Send + 'static,
        R: Send + 'static,
    {
        self.scatter(asks, move |here: Rc<Shard>, share: Share<A>| -> Served<R> {
            Box::pin(
                async move { share.into_iter().map(|(tp, a)| here.leader_log(&tp).and_then(|p| op(&p, a))).collect() },
            )
        })
        .await
    }

    /// Appends produced batches on their partitions' home shards; each result once the
    /// append is acknowledged (durable, if the topic's flush policy says so).
    pub async fn produce(self: &Rc<Self>, batches: Share<Bytes>, acks: ProduceAcks) -> Vec<Produced> {
        let results = self.scatter(batches, move |here, share| serve_produce(here, share, acks)).await;
        results.into_iter().map(|r| r.unwrap_or_else(|code| Err(code.into()))).collect()
    }

    /// Reads partitions on their home shards: offsets and a file region each, never the bytes.
    pub async fn fetch(self: &Rc<Self>, asks: Share<FetchAsk>) -> Vec<PartResult<ReadOut>> {
        self.on_epochs(asks, |a| a.current_leader_epoch, |p, _, a| p.read(a.offset, a.max_bytes, true)).await
    }

    /// OffsetForLeaderEpoch: (epoch, end offset) of each ask's epoch, as the leader has it.
    pub async fn epoch_end_offsets(self: &Rc<Self>, asks: Share<EpochAsk>) -> Vec<PartResult<(i32, i64)>> {
        self.scatter(asks, move |here: Rc<Shard>, share: Share<EpochAsk>| -> Served<(i32, i64)> {
            Box::pin(async move {
                let end = |tp: Tp, a: EpochAsk| match here.cluster().and_then(|c| c.group(&tp)) {
                    Some(g) => g.end_offset_for_epoch(a.current, a.epoch),
                    None => {
                        let p = here.log(&tp)?;
                        alone_epoch(a.current)?;
                        Ok(alone_epoch_end(a.epoch, p.offsets().log_end))
                    }
                };
                share.into_iter().map(|(tp, a)| end(tp, a)).collect()
            })
        })
        .await
    }

    /// Runs a synchronous partition operation on each ask's home shard, at the leader the
    /// ask's `current` epoch names; `op` gets the leader epoch.
    async fn on_epochs<A, R>(
        self: &Rc<Self>,
        asks: Share<A>,
        current: fn(&A) -> i32,
        op: fn(&Partition, i32, A) -> PartResult<R>,
    ) -> Vec<PartResult<R>>
    where
        A: Send + 'static,
        R: Send + 'static,
    {
        self.scatter(asks, move |here: Rc<Shard>, share: Share<A>| -> Served<R> {
            Box::pin(async move {
                let run = |tp: Tp, a: A| here.epoch_checked(&tp, current(&a)).and_then(|(p, epoch)| op(&p, epoch, a));
                share.into_iter().map(|(tp, a)| run(tp, a)).collect()
            })
        })
        .await
    }

    /// Completes when the high watermark of any of the partitions passes its offset, or after
    /// about `wait`: each home shard touched registers its share's watches at once and stops
    /// watching after `wait`, so idle partitions do not collect watchers.
    pub async fn watch(self: &Rc<Self>, asks: Share<i64>, wait: Duration) {
        let Split::<i64, ()> { shares, .. } = self.split(asks);
        if shares.is_empty() {
            // Nothing to watch (a read reports unknown partitions): only the wait.
            return metrics::remote(glommio::timer::sleep(wait)).await;
        }
        let serve =
            move |here: Rc<Shard>, share: Share<i64>| -> Served<()> { Box::pin(serve_watch(here, share, wait)) };
        let calls: Vec<_> = shares.into_iter().map(|(home, (_, share))| self.on_home(home, share, serve)).collect();
        metrics::remote(first_of(calls)).await
    }

    pub async fn offsets(self: &Rc<Self>, partitions: Vec<Tp>) -> Vec<PartResult<Offsets>> {
        self.on_partitions(partitions.into_iter().map(|tp| (tp, ())).collect(), |p, ()| Ok(p.offsets())).await
    }

    /// DeleteRecords: moves each log start (-1: to the high watermark); the new log starts.
    /// A replicated partition's goes through its raft group (answered once committed, within
    /// `timeout`).
    pub async fn delete_records(self: &Rc<Self>, asks: Share<i64>, timeout: Duration) -> Vec<PartResult<i64>> {
        self.scatter(asks, move |here: Rc<Shard>, share: Share<i64>| -> Served<i64> {
            Box::pin(async move {
                let moves = share.into_iter().map(|(tp, offset)| {
                    let here = &here;
                    async move {
                        let p = here.leader_log(&tp)?;
                        // Kafka refuses to delete records a compact-only topic keeps by key.
                        if !p.config().delete {
                            return Err(ErrorCode::PolicyViolation);
                        }
                        let Some(g) = here.cluster().and_then(|c| c.group(&tp)) else {
                            return p.delete_records(offset);
                        };
                        let rx = g.delete_records(offset)?;
                        // A group that stops drops its waiters: the client retries at the next leader.
                        let answer = async { Some(rx.await.unwrap_or(Err(ErrorCode::NotLeaderOrFollower))) };
                        let committed = futures_lite::future::or(answer, async {
                            glommio::timer::sleep(timeout).await;
                            None
                        });
                        match committed.await {
                            Some(appended) => Ok(appended?.log_start_offset),
                            None => Err(ErrorCode::RequestTimedOut),
                        }
                    }
                });
                join_all(moves).await
            })
        })
        .await
    }

    /// Each partition's idempotent producers, from any replica (DescribeProducers asks each
    /// broker of its own, as `kafka-transactions describe-producers --broker-id` does): every
    /// replica applies producer state from the log.
    pub async fn producers(self: &Rc<Self>, partitions: Vec<Tp>) -> Vec<PartResult<Vec<ProducerSummary>>> {
        let asks = partitions.into_iter().map(|tp| (tp, ())).collect();
        self.scatter(asks, move |here: Rc<Shard>, share: Share<()>| -> Served<Vec<ProducerSummary>> {
            Box::pin(async move { share.into_iter().map(|(tp, ())| Ok(here.log(&tp)?.producers())).collect() })
        })
        .await
    }

    /// ListOffsets of clients that believe the leader epochs given: the (offset, timestamp,
    /// leader epoch) each query finds, (-1, -1, -1) for none. The epoch is Kafka's: the
    /// current one for LATEST, else that of the batch holding the offset found.
    pub async fn list_offsets(self: &Rc<Self>, asks: Share<(OffsetQuery, i32)>) -> Vec<PartResult<(i64, i64, i32)>> {
        const NONE: (i64, i64) = (-1, -1);
        self.scatter(asks, move |here: Rc<Shard>, share: Share<(OffsetQuery, i32)>| -> Served<(i64, i64, i32)> {
            Box::pin(async move {
                let find = |tp: Tp, (query, current): (OffsetQuery, i32)| {
                    let (p, latest) = here.epoch_checked(&tp, current)?;
                    let (offset, ts) = match query {
                        OffsetQuery::Latest => (p.offsets().high_watermark, -1),
                        OffsetQuery::Earliest => (p.offsets().log_start, -1),
                        OffsetQuery::LatestTiered => NONE,
                        OffsetQuery::MaxTimestamp => p.max_timestamp_offset().unwrap_or(NONE),
                        OffsetQuery::AtTime(ts) => p.offset_for_time(ts)?.unwrap_or(NONE),
                    };
                    let epoch = match here.cluster().and_then(|c| c.group(&tp)) {
                        _ if offset < 0 => -1,
                        Some(g) if query != OffsetQuery::Latest => g.epoch_at(offset),
                        _ => latest,
                    };
                    Ok((offset, ts, epoch))
                };
                share.into_iter().map(|(tp, a)| find(tp, a)).collect()
            })
        })
        .await
    }

    /// Waits for an append's ack, counting it as a delayed produce when it is not there yet.
    async fn acked(&self, mut rx: oneshot::Receiver<Result<Appended, ErrorCode>>) -> Result<Appended, ErrorCode> {
        match rx.try_recv() {
            Ok(Some(r)) => return r,
            Ok(None) => self.probe.delayed_produce(),
            Err(_) => return Err(ErrorCode::KafkaStorageError),
        }
        metrics::remote(rx).await.unwrap_or(Err(ErrorCode::KafkaStorageError))
    }
}

/// Appends every batch of the share now, in order (so batches of one connection keep their
/// order on a partition), then waits for all their acks.
/// Every result is `Ok`: a refusal is the inner result, with what the log said of it.
fn serve_produce(here: Rc<Shard>, share: Share<Bytes>, acks: ProduceAcks) -> Served<Produced> {
    let appends: Vec<_> = share.into_iter().map(|(tp, records)| here.append(&tp, &records, acks)).collect();
    Box::pin(async move {
        let acks = appends.into_iter().map(|a| {
            let here = &here;
            async move {
                let acked = match a {
                    Ok((rx, None)) => here.acked(rx).await,
                    Ok((rx, Some(timeout))) => {
                        futures_lite::future::or(here.acked(rx), async {
                            glommio::timer::sleep(timeout).await;
                            Err(ErrorCode::RequestTimedOut)
                        })
                        .await
                    }
                    Err(refusal) => return Ok(Err(refusal)),
                };
                Ok(acked.map_err(Refusal::from))
            }
        });
        join_all(acks).await
    })
}

type AckRx = oneshot::Receiver<Result<Appended, ErrorCode>>;

impl Shard {
    /// Starts one append: to the log, or through its raft group when replicated (which
    /// then answers within the produce's timeout).
    fn append(&self, tp: &Tp, records: &Bytes, acks: ProduceAcks) -> Result<(AckRx, Option<Duration>), Refusal> {
        let p = self.log(tp)?;
        let Some(g) = self.cluster().and_then(|c| c.group(tp)) else { return Ok((p.append(records)?, None)) };
        let how = match acks.all_replicas {
            // Kafka 4 (KIP-966) asks for at most as many copies as there are voters.
            true => {
                let voters = g.voters().len().max(1);
                Acks::All { min_insync: (p.config().min_insync_replicas.max(1) as usize).min(voters) }
            }
            false => Acks::Leader,
        };
        Ok((g.produce(records, how)?, Some(acks.timeout)))
    }
}

/// Watches every partition of the share; answers when one has data past its offset or
/// `wait` has passed. An unknown partition answers at once (the fetch then sees the error).
async fn serve_watch(here: Rc<Shard>, share: Share<i64>, wait: Duration) -> Vec<PartResult<()>> {
    let n = share.len();
    let mut arrived = Vec::with_capacity(n);
    for (tp, offset) in share {
        let Ok(p) = here.leader_log(&tp) else { return vec![Ok(()); n] };
        let (tx, rx) = oneshot::channel();
        p.watch(offset, tx);
        arrived.push(rx);
    }
    futures_lite::future::or(first_of(arrived), glommio::timer::sleep(wait)).await;
    vec![Ok(()); n]
}
