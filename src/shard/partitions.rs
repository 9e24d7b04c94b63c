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
use crate::log::{Appended, Offsets, Partition, ReadOut};
use crate::metrics;
use crate::producer::ProducerSummary;
use crate::protocol::ErrorCode;

pub type PartResult<R> = Result<R, ErrorCode>;
/// Asks about partitions, each with its partition.
pub type Share<A> = Vec<(Tp, A)>;
/// The home half of an operation: serves one shard's share of the asks.
type Served<R> = Pin<Box<dyn Future<Output = Vec<PartResult<R>>>>>;

/// A fetch of one partition: from `offset`, at most `max_bytes`.
#[derive(Debug, Clone, Copy)]
pub struct FetchAsk {
    pub offset: i64,
    pub max_bytes: u32,
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
        self.logs.borrow().get(tp).cloned().ok_or(ErrorCode::UnknownTopicOrPartition)
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
            Box::pin(async move { share.into_iter().map(|(tp, a)| here.log(&tp).and_then(|p| op(&p, a))).collect() })
        })
        .await
    }

    /// Appends produced batches on their partitions' home shards; each result once the
    /// append is acknowledged (durable, if the topic's flush policy says so).
    pub async fn produce(self: &Rc<Self>, batches: Share<Bytes>) -> Vec<PartResult<Appended>> {
        self.scatter(batches, serve_produce).await
    }

    /// Reads partitions on their home shards: offsets and a file region each, never the bytes.
    pub async fn fetch(self: &Rc<Self>, asks: Share<FetchAsk>) -> Vec<PartResult<ReadOut>> {
        self.on_partitions(asks, |p, a| p.read(a.offset, a.max_bytes, true)).await
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
    pub async fn delete_records(self: &Rc<Self>, asks: Share<i64>) -> Vec<PartResult<i64>> {
        self.on_partitions(asks, |p, offset| p.delete_records(offset)).await
    }

    /// Each partition's idempotent producers.
    pub async fn producers(self: &Rc<Self>, partitions: Vec<Tp>) -> Vec<PartResult<Vec<ProducerSummary>>> {
        self.on_partitions(partitions.into_iter().map(|tp| (tp, ())).collect(), |p, ()| Ok(p.producers())).await
    }

    /// ListOffsets: the (offset, timestamp) each query finds, (-1, -1) for none.
    pub async fn list_offsets(self: &Rc<Self>, asks: Share<OffsetQuery>) -> Vec<PartResult<(i64, i64)>> {
        const NONE: (i64, i64) = (-1, -1);
        self.on_partitions(asks, |p, query| match query {
            OffsetQuery::Latest => Ok((p.offsets().high_watermark, -1)),
            OffsetQuery::Earliest => Ok((p.offsets().log_start, -1)),
            OffsetQuery::LatestTiered => Ok(NONE),
            OffsetQuery::MaxTimestamp => Ok(p.max_timestamp_offset().unwrap_or(NONE)),
            OffsetQuery::AtTime(ts) => Ok(p.offset_for_time(ts)?.unwrap_or(NONE)),
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
fn serve_produce(here: Rc<Shard>, share: Share<Bytes>) -> Served<Appended> {
    let appends: Vec<_> =
        share.into_iter().map(|(tp, records)| here.log(&tp).and_then(|p| p.append(&records))).collect();
    Box::pin(async move {
        let acks = appends.into_iter().map(|a| {
            let here = &here;
            async move {
                match a {
                    Ok(rx) => here.acked(rx).await,
                    Err(e) => Err(e),
                }
            }
        });
        join_all(acks).await
    })
}

/// Watches every partition of the share; answers when one has data past its offset or
/// `wait` has passed. An unknown partition answers at once (the fetch then sees the error).
async fn serve_watch(here: Rc<Shard>, share: Share<i64>, wait: Duration) -> Vec<PartResult<()>> {
    let n = share.len();
    let mut arrived = Vec::with_capacity(n);
    for (tp, offset) in share {
        let Ok(p) = here.log(&tp) else { return vec![Ok(()); n] };
        let (tx, rx) = oneshot::channel();
        p.watch(offset, tx);
        arrived.push(rx);
    }
    futures_lite::future::or(first_of(arrived), glommio::timer::sleep(wait)).await;
    vec![Ok(()); n]
}
