//! Fetch sessions (KIP-227): a consumer or follower that fetches many partitions names them
//! all once, in a full fetch that creates a session; later fetches of the session
//! (incremental ones) name only the partitions whose fetch offset or size changed and the
//! partitions to forget, and their responses carry only the partitions with something to
//! say. This module is the cache of sessions and their rules, with no I/O: times and what the
//! fetch read are passed in (`api::fetch` is the handler that drives it).
//!
//! **One cache per shard.** A fetch runs on its connection's shard, and shards share nothing
//! mutable, so each shard keeps the sessions its connections created, in a `FetchSessions`
//! that only its thread touches. A client reconnecting lands on whichever shard serves the fewest
//! connections at that moment (the server hands connections over to balance the shards): if
//! that is another shard, its next incremental fetch is answered
//! FETCH_SESSION_ID_NOT_FOUND, and Kafka clients then start over with a full fetch, which
//! creates a session on the new shard. The old session is not closed across shards: it is
//! never used again and goes when eviction needs its slot (it is stale after
//! `min_incremental_fetch_session_eviction_ms`).
//!
//! **Ids.** Each shard draws its ids, pseudo-randomly from a random seed, from its own slice
//! of the positive `i32`s (`[max(1, shard * span), (shard + 1) * span)` with
//! `span = i32::MAX / shards`, as Kafka slices ids between its cache shards), so ids are
//! unique across shards, never 0 (0 means "no session"), and not guessable by counting.
//!
//! **Slots and eviction, Kafka's FetchSessionCache rules.** The broker's
//! `max_incremental_fetch_session_cache_slots` is divided between the shards (each gets the
//! quotient rounded up, so every shard has at least one when the budget is not 0; 0 turns
//! sessions off), as Kafka divides it between its cache shards. A full fetch with epoch 0
//! creates a session when its shard has a free slot, or when it can evict one:
//! 1. the least recently used session, if unused for longer than
//!    `min_incremental_fetch_session_eviction_ms` (stale); else
//! 2. the least valuable evictable session, ordered by (privileged, partitions, id), if the
//!    newcomer, keyed (privileged, partitions, 0), is not smaller. Evictable means: for a
//!    newcomer that is not privileged, a session that, when last used, was older than the
//!    eviction time; for a privileged newcomer (a follower's), also any session that is not
//!    privileged. So a consumer can only push out an older session with fewer partitions.
//!
//! Otherwise the fetch is answered as a sessionless one (session id 0), and the client keeps
//! sending full fetches.
//!
//! **Incremental fetches.** The request's epoch must be the session's next (1 after the
//! creating fetch, then +1 each time, wrapping to 1): else INVALID_FETCH_SESSION_EPOCH; an
//! unknown id is FETCH_SESSION_ID_NOT_FOUND; a request whose version names topics differently
//! (by id from v13, by name before) than the session's creator is FETCH_SESSION_TOPIC_ID_ERROR.
//! The request's partitions are added or updated, the forgotten ones removed, the epoch moves
//! on, and the fetch reads every partition of the session. Its answer keeps only partitions
//! with records, an error, or a high watermark or log start offset different from what the
//! session last sent (a partition just added has sent nothing, so it is always answered);
//! after an error the session forgets the high watermark, so the partition is answered again
//! once the error is gone. Partitions that returned records move to the end of the session's
//! order, so that under `max_bytes` the others are read first next time. A session left
//! without partitions is closed, and that fetch is answered as sessionless.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use uuid::Uuid;

use crate::protocol::ErrorCode;
use crate::rng::SplitMix64;

/// The epoch of a full fetch that asks for a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that wants no session (and closes the one it names).
pub const FINAL_EPOCH: i32 = -1;

/// The epoch a session expects after one carrying `epoch`.
pub fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        e if e < 0 => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

/// How a fetch names a topic: by name before Fetch v13, by id from v13.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicRef {
    Name(String),
    Id(Uuid),
}

/// A partition as a fetch asks for it (from the request, or remembered by its session).
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub topic: TopicRef,
    /// The topic's name when known. A session by id keeps the name it last resolved, so a
    /// deleted topic is still named (Kafka answers it UNKNOWN_TOPIC_OR_PARTITION, and an id
    /// never known UNKNOWN_TOPIC_ID).
    pub name: Option<String>,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: u32,
    pub current_leader_epoch: i32,
}

impl Asked {
    fn key(&self) -> (TopicRef, i32) {
        (self.topic.clone(), self.partition)
    }
}

/// What a fetch's read found of one partition, as far as its session cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub high_watermark: i64,
    pub log_start: i64,
    pub error: bool,
    pub records: bool,
}

/// What `FetchSessions::create` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The new session's id, 0 when the cache had no slot for it.
    pub id: i32,
    /// Whether a session was evicted to make room.
    pub evicted: bool,
}

/// What an incremental request changes in its session.
#[derive(Debug, Clone, Copy)]
pub struct Changes<'a> {
    /// Partitions added, or updated (fetch offset, size, leader epoch).
    pub asked: &'a [Asked],
    /// Partitions removed.
    pub forgotten: &'a [(TopicRef, i32)],
}

impl Changes<'_> {
    /// A request that changes nothing.
    pub const NONE: Changes<'static> = Changes { asked: &[], forgotten: &[] };
}

/// An incremental fetch after its request was applied to its session.
#[derive(Debug, Clone, PartialEq)]
pub enum Incremental {
    /// Read the session's partitions, then `answer`.
    Open(Opened),
    /// The request forgot the session's last partitions: the session is gone, and the fetch
    /// is answered as a sessionless one.
    Closed,
}

/// An incremental fetch between its request and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    /// The partitions to read: the whole session, in its order.
    pub partitions: Vec<Asked>,
    id: i32,
    /// The epoch the session expects next, once this fetch is answered.
    epoch: i32,
    /// What the session had last answered of each partition (high watermark, log start).
    sent: Vec<(i64, i64)>,
}

struct Cached {
    asked: Asked,
    /// What the session last answered (-1: nothing yet, or an error since).
    high_watermark: i64,
    log_start: i64,
}

struct Session {
    /// A follower's session: evicted only by another follower's or once old.
    privileged: bool,
    by_id: bool,
    created_ms: u64,
    last_used_ms: u64,
    /// The epoch the next incremental request must carry.
    epoch: i32,
    parts: Vec<Cached>,
    index: HashMap<(TopicRef, i32), usize>,
}

impl Session {
    fn reindex(&mut self) {
        self.index = self.parts.iter().enumerate().map(|(i, c)| (c.asked.key(), i)).collect();
    }

    /// Kafka decides this when the session is used (`touch`), not as time goes by.
    fn old_when_last_used(&self, eviction_ms: u64) -> bool {
        self.last_used_ms.saturating_sub(self.created_ms) > eviction_ms
    }
}

/// One shard's fetch sessions. Only the shard's thread uses it, and no borrow outlives a call
/// (none is held across an `.await`).
pub struct FetchSessions {
    cache: RefCell<Cache>,
}

struct Cache {
    origin: Instant,
    /// This shard's ids: `first..end`.
    first: i32,
    end: i32,
    slots: usize,
    eviction_ms: u64,
    rng: SplitMix64,
    sessions: HashMap<i32, Session>,
    partitions: usize,
}

impl FetchSessions {
    /// The cache of shard `shard` of `shards`, with its part of the broker's `slots` and
    /// Kafka's minimum eviction time; `seed` makes the ids unpredictable.
    pub fn new(shard: usize, shards: usize, slots: u32, eviction_ms: u64, seed: u64) -> FetchSessions {
        let shards = shards.max(1);
        let span = (i32::MAX as usize / shards) as i64;
        let first = (shard as i64 * span).max(1);
        let end = (shard as i64 + 1) * span;
        let ids = (end - first).max(0) as usize;
        let per_shard = (slots as usize).div_ceil(shards).min(ids);
        FetchSessions {
            cache: RefCell::new(Cache {
                origin: Instant::now(),
                first: first as i32,
                end: end as i32,
                slots: per_shard,
                eviction_ms,
                rng: SplitMix64::new(seed),
                sessions: HashMap::new(),
                partitions: 0,
            }),
        }
    }

    /// Sessions in the cache.
    pub fn len(&self) -> usize {
        self.cache.borrow().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Partitions over all sessions in the cache.
    pub fn partitions(&self) -> usize {
        self.cache.borrow().partitions
    }

    /// Sessions this shard may hold.
    pub fn slots(&self) -> usize {
        self.cache.borrow().slots
    }

    /// Whether `id` is in this shard's slice of ids.
    pub fn owns(&self, id: i32) -> bool {
        let c = self.cache.borrow();
        (c.first..c.end).contains(&id)
    }

    /// Removes session `id` (a full fetch naming it); whether there was one.
    pub fn close(&self, id: i32) -> bool {
        self.cache.borrow_mut().remove(id)
    }

    /// A full fetch with epoch 0 read `parts` (in request order) and found `answers`: keeps a
    /// session of them if the cache admits it.
    pub fn create(&self, now: Instant, privileged: bool, by_id: bool, parts: Vec<(Asked, Answer)>) -> Created {
        let mut c = self.cache.borrow_mut();
        let now = c.ms(now);
        let mut session = Session {
            privileged,
            by_id,
            created_ms: now,
            last_used_ms: now,
            epoch: next_epoch(INITIAL_EPOCH),
            parts: Vec::with_capacity(parts.len()),
            index: HashMap::with_capacity(parts.len()),
        };
        for (asked, answer) in parts {
            let high_watermark = if answer.error { -1 } else { answer.high_watermark };
            let cached = Cached { asked, high_watermark, log_start: answer.log_start };
            // A partition named twice: the later values, at the first place.
            match session.index.get(&cached.asked.key()) {
                Some(&i) => session.parts[i] = cached,
                None => {
                    session.index.insert(cached.asked.key(), session.parts.len());
                    session.parts.push(cached);
                }
            }
        }
        let Some(evicted) = c.admit(now, privileged, session.parts.len()) else {
            return Created { id: 0, evicted: false };
        };
        let id = c.new_id();
        c.partitions += session.parts.len();
        c.sessions.insert(id, session);
        Created { id, evicted }
    }

    /// An incremental fetch of session `id` with `epoch`: applies its changes, resolves the names of topics by id that were
    /// unknown (`name_of`), and moves the epoch on. Session errors are the fetch's top-level
    /// error.
    pub fn update(
        &self,
        id: i32,
        epoch: i32,
        by_id: bool,
        now: Instant,
        changes: Changes<'_>,
        name_of: impl Fn(&Uuid) -> Option<String>,
    ) -> Result<Incremental, ErrorCode> {
        let Changes { asked, forgotten } = changes;
        let mut c = self.cache.borrow_mut();
        let now = c.ms(now);
        let s = c.sessions.get_mut(&id).ok_or(ErrorCode::FetchSessionIdNotFound)?;
        if s.epoch != epoch {
            return Err(ErrorCode::InvalidFetchSessionEpoch);
        }
        if s.by_id != by_id {
            return Err(ErrorCode::FetchSessionTopicIdError);
        }
        let before = s.parts.len();
        for a in asked {
            match s.index.get(&a.key()) {
                Some(&i) => {
                    let cached = &mut s.parts[i].asked;
                    cached.fetch_offset = a.fetch_offset;
                    cached.max_bytes = a.max_bytes;
                    cached.current_leader_epoch = a.current_leader_epoch;
                    if a.name.is_some() {
                        cached.name.clone_from(&a.name);
                    }
                }
                None => {
                    s.index.insert(a.key(), s.parts.len());
                    s.parts.push(Cached { asked: a.clone(), high_watermark: -1, log_start: -1 });
                }
            }
        }
        let gone: Vec<usize> = forgotten.iter().filter_map(|k| s.index.get(k).copied()).collect();
        if !gone.is_empty() {
            let mut keep = vec![true; s.parts.len()];
            for i in gone {
                keep[i] = false;
            }
            let mut i = 0;
            s.parts.retain(|_| {
                i += 1;
                keep[i - 1]
            });
            s.reindex();
        }
        if by_id {
            for p in s.parts.iter_mut().filter(|p| p.asked.name.is_none()) {
                if let TopicRef::Id(topic) = &p.asked.topic {
                    p.asked.name = name_of(topic);
                }
            }
        }
        let after = s.parts.len();
        if after == 0 {
            c.sessions.remove(&id);
            c.partitions -= before;
            return Ok(Incremental::Closed);
        }
        s.last_used_ms = now;
        s.epoch = next_epoch(epoch);
        let open = Opened {
            partitions: s.parts.iter().map(|p| p.asked.clone()).collect(),
            id,
            epoch: s.epoch,
            sent: s.parts.iter().map(|p| (p.high_watermark, p.log_start)).collect(),
        };
        c.partitions = c.partitions + after - before;
        Ok(Incremental::Open(open))
    }

    /// The read of an incremental fetch that `update` opened found `answers` (one per
    /// partition, in the order `update` gave): which partitions the response keeps. The
    /// session remembers what it answered. If another fetch of the session came in between,
    /// the epoch no longer matches (INVALID_FETCH_SESSION_EPOCH). If the session was closed
    /// or evicted meanwhile (a consumer closing while its fetch waits), the answer is still
    /// made from what the session had sent, as Kafka does, and the next fetch of the
    /// session is the one that learns it is gone.
    pub fn answer(&self, opened: &Opened, answers: &[Answer]) -> Result<Vec<bool>, ErrorCode> {
        let news =
            |(hw, ls): (i64, i64), a: &Answer| a.records || a.error || hw != a.high_watermark || ls != a.log_start;
        if opened.sent.len() != answers.len() {
            return Err(ErrorCode::InvalidFetchSessionEpoch);
        }
        let mut c = self.cache.borrow_mut();
        let Some(s) = c.sessions.get_mut(&opened.id) else {
            return Ok(opened.sent.iter().zip(answers).map(|(sent, a)| news(*sent, a)).collect());
        };
        if s.epoch != opened.epoch {
            return Err(ErrorCode::InvalidFetchSessionEpoch);
        }
        let mut keep = Vec::with_capacity(answers.len());
        for (p, a) in s.parts.iter_mut().zip(answers) {
            keep.push(news((p.high_watermark, p.log_start), a));
            p.high_watermark = if a.error { -1 } else { a.high_watermark };
            p.log_start = a.log_start;
        }
        if answers.iter().any(|a| a.records) {
            // Those that returned records go last, in the order they came.
            let (fed, rest): (Vec<_>, Vec<_>) =
                std::mem::take(&mut s.parts).into_iter().zip(answers).partition(|(_, a)| a.records);
            s.parts = rest.into_iter().chain(fed).map(|(p, _)| p).collect();
            s.reindex();
        }
        Ok(keep)
    }
}

impl Cache {
    fn ms(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_millis() as u64
    }

    fn remove(&mut self, id: i32) -> bool {
        match self.sessions.remove(&id) {
            Some(s) => {
                self.partitions -= s.parts.len();
                true
            }
            None => false,
        }
    }

    /// Whether a new session of `size` partitions gets a slot (Some), and whether a session
    /// was evicted for it.
    fn admit(&mut self, now: u64, privileged: bool, size: usize) -> Option<bool> {
        if self.sessions.len() < self.slots {
            return Some(false);
        }
        let (&lru, s) = self.sessions.iter().min_by_key(|(id, s)| (s.last_used_ms, **id))?;
        if now.saturating_sub(s.last_used_ms) > self.eviction_ms {
            self.remove(lru);
            return Some(true);
        }
        let eviction_ms = self.eviction_ms;
        let evictable = |s: &Session| s.old_when_last_used(eviction_ms) || (privileged && !s.privileged);
        let (victim, key) = self
            .sessions
            .iter()
            .filter(|(_, s)| evictable(s))
            .map(|(id, s)| (*id, (s.privileged, s.parts.len(), *id)))
            .min_by_key(|(_, key)| *key)?;
        if (privileged, size, 0) < key {
            return None;
        }
        self.remove(victim);
        Some(true)
    }

    fn new_id(&mut self) -> i32 {
        let span = (self.end - self.first) as u64;
        loop {
            let z = self.rng.next_u64();
            let id = self.first + (z % span) as i32;
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn asked(topic: &str, partition: i32, offset: i64) -> Asked {
        Asked {
            topic: TopicRef::Name(topic.into()),
            name: Some(topic.into()),
            partition,
            fetch_offset: offset,
            max_bytes: 1 << 20,
            current_leader_epoch: -1,
        }
    }

    fn answer(high_watermark: i64) -> Answer {
        Answer { high_watermark, log_start: 0, error: false, records: false }
    }

    fn full(n: i32) -> Vec<(Asked, Answer)> {
        (0..n).map(|p| (asked("t", p, 0), answer(0))).collect()
    }

    fn at(c: &FetchSessions, ms: u64) -> Instant {
        c.cache.borrow().origin + Duration::from_millis(ms)
    }

    fn touch(c: &FetchSessions, id: i32, epoch: i32, ms: u64) -> i32 {
        match c.update(id, epoch, false, at(c, ms), Changes::NONE, |_| None).expect("session") {
            Incremental::Open(opened) => opened.epoch,
            Incremental::Closed => panic!("closed"),
        }
    }

    #[test]
    fn ids_are_in_the_shards_slice_never_zero_and_distinct() {
        for shard in 0..4 {
            let c = FetchSessions::new(shard, 4, 400, 1000, 7 + shard as u64);
            let mut seen = std::collections::HashSet::new();
            for _ in 0..100 {
                let id = c.create(Instant::now(), false, false, full(1)).id;
                assert!(id > 0 && c.owns(id), "{id}");
                assert_eq!(id as i64 / (i32::MAX as i64 / 4), shard as i64, "{id} encodes shard {shard}");
                assert!(seen.insert(id));
            }
            assert_eq!(c.len(), 100);
        }
    }

    #[test]
    fn the_slot_budget_is_divided_between_shards_rounded_up() {
        assert_eq!(FetchSessions::new(0, 8, 1000, 1, 0).slots(), 125);
        assert_eq!(FetchSessions::new(1, 3, 1000, 1, 0).slots(), 334);
        assert_eq!(FetchSessions::new(0, 4, 1, 1, 0).slots(), 1);
        assert_eq!(FetchSessions::new(0, 4, 0, 1, 0).slots(), 0);
        let off = FetchSessions::new(0, 1, 0, 1, 0);
        assert_eq!(off.create(Instant::now(), true, false, full(3)).id, 0, "no slots: no sessions");
    }

    #[test]
    fn epochs_count_from_one_and_wrap_to_one() {
        assert_eq!(next_epoch(INITIAL_EPOCH), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
        let c = FetchSessions::new(0, 1, 10, 1000, 1);
        let id = c.create(at(&c, 0), false, false, full(2)).id;
        assert_eq!(touch(&c, id, 1, 1), 2);
        assert_eq!(
            c.update(id, 1, false, at(&c, 2), Changes::NONE, |_| None),
            Err(ErrorCode::InvalidFetchSessionEpoch)
        );
        assert_eq!(c.update(id, 2, true, at(&c, 2), Changes::NONE, |_| None), Err(ErrorCode::FetchSessionTopicIdError));
        assert_eq!(
            c.update(id + 1, 2, false, at(&c, 2), Changes::NONE, |_| None),
            Err(ErrorCode::FetchSessionIdNotFound)
        );
        assert_eq!(touch(&c, id, 2, 3), 3);
    }

    #[test]
    fn a_stale_session_is_evicted_first() {
        let c = FetchSessions::new(0, 1, 2, 100, 1);
        let big = c.create(at(&c, 0), false, false, full(10)).id;
        let small = c.create(at(&c, 50), false, false, full(1)).id;
        // At 90 ms nothing is stale (unused for more than 100 ms) and nothing is old enough.
        assert_eq!(c.create(at(&c, 90), false, false, full(20)).id, 0);
        // At 130 ms `big` is stale, though it has more partitions than the newcomer.
        let new = c.create(at(&c, 130), false, false, full(1));
        assert!(new.id != 0 && new.evicted);
        assert!(!c.close(big), "evicted");
        assert!(c.close(small));
        assert_eq!(c.partitions(), 1);
    }

    #[test]
    fn an_old_session_with_fewer_partitions_gives_way_to_a_bigger_one() {
        let c = FetchSessions::new(0, 1, 1, 100, 1);
        let a = c.create(at(&c, 0), false, false, full(3)).id;
        // Used at 150 ms, when it was older than the eviction time: evictable from then on.
        touch(&c, a, 1, 150);
        assert_eq!(c.create(at(&c, 160), false, false, full(3)).id, 0, "same size: kept");
        assert_eq!(c.create(at(&c, 160), false, false, full(2)).id, 0, "smaller: kept");
        let b = c.create(at(&c, 170), false, false, full(4));
        assert!(b.id != 0 && b.evicted);
        assert_eq!(c.update(a, 2, false, at(&c, 171), Changes::NONE, |_| None), Err(ErrorCode::FetchSessionIdNotFound));
    }

    #[test]
    fn a_young_session_is_kept_unless_a_follower_needs_the_slot() {
        let c = FetchSessions::new(0, 1, 1, 100, 1);
        let consumer = c.create(at(&c, 0), false, false, full(3)).id;
        touch(&c, consumer, 1, 10);
        assert_eq!(c.create(at(&c, 20), false, false, full(50)).id, 0, "too young for a consumer to evict");
        let follower = c.create(at(&c, 30), true, false, full(1));
        assert!(follower.id != 0 && follower.evicted, "a follower evicts any consumer's session");
        assert_eq!(c.create(at(&c, 40), true, false, full(50)).id, 0, "but not a young follower's");
    }

    fn open(c: &FetchSessions, id: i32, epoch: i32, asked: &[Asked], forgotten: &[(TopicRef, i32)]) -> Opened {
        match c.update(id, epoch, false, at(c, 1), Changes { asked, forgotten }, |_| None) {
            Ok(Incremental::Open(opened)) => opened,
            other => panic!("not open: {other:?}"),
        }
    }

    #[test]
    fn an_incremental_answer_keeps_only_what_changed_and_rotates_fed_partitions() {
        let c = FetchSessions::new(0, 1, 10, 1000, 1);
        let id =
            c.create(at(&c, 0), false, false, vec![(asked("t", 0, 0), answer(5)), (asked("t", 1, 0), answer(5))]).id;
        let opened = open(&c, id, 1, &[asked("u", 0, 0)], &[(TopicRef::Name("t".into()), 1)]);
        let names: Vec<_> = opened.partitions.iter().map(|p| (p.name.clone().unwrap(), p.partition)).collect();
        assert_eq!(names, [("t".to_string(), 0), ("u".to_string(), 0)]);
        let fed = Answer { records: true, ..answer(6) };
        assert_eq!(c.answer(&opened, &[fed, answer(0)]), Ok(vec![true, true]), "u/0 is new");
        let opened = open(&c, id, 2, &[], &[]);
        assert_eq!(opened.partitions[0].topic, TopicRef::Name("u".into()), "t/0 returned records: it goes last");
        let err = Answer { error: true, ..answer(-1) };
        assert_eq!(c.answer(&opened, &[answer(0), err]), Ok(vec![false, true]));
        let stale = Opened { epoch: opened.epoch + 1, ..opened.clone() };
        assert_eq!(c.answer(&stale, &[answer(0), answer(6)]), Err(ErrorCode::InvalidFetchSessionEpoch));
        let forget = [(TopicRef::Name("t".into()), 0), (TopicRef::Name("u".into()), 0)];
        assert_eq!(
            c.update(id, 3, false, at(&c, 3), Changes { asked: &[], forgotten: &forget }, |_| None),
            Ok(Incremental::Closed)
        );
        assert!(c.is_empty());
        assert_eq!(c.partitions(), 0);
    }

    #[test]
    fn a_fetch_whose_session_closed_while_it_read_is_answered_from_what_was_sent() {
        let c = FetchSessions::new(0, 1, 10, 1000, 1);
        let id =
            c.create(at(&c, 0), false, false, vec![(asked("t", 0, 0), answer(5)), (asked("t", 1, 0), answer(5))]).id;
        let opened = open(&c, id, 1, &[], &[]);
        assert!(c.close(id));
        assert_eq!(c.answer(&opened, &[answer(5), answer(7)]), Ok(vec![false, true]));
    }
}
