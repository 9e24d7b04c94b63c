//! The broker-to-broker frame: everything one broker has for another in one loop turn, in
//! one length-prefixed frame: raft messages whatever their groups (heartbeats of many
//! partitions ride together, as Redpanda's heartbeat manager batches them), and calls to a
//! peer's controller with their replies (`Item`).
//!
//! ```text
//! u32  length of what follows
//! u8   version = 2
//! u64  sender's node id
//! u32  item count, then per item a kind byte:
//!      0 raft message: u16 topic length, topic (UTF-8), 16 bytes topic id (all zero for
//!                      the metadata log), i32 partition,
//!                      u32 message length, the raft message (raft-rs's protobuf encoding)
//!      1 call, 2 reply: u64 call id, u32 body length, body
//! ```
//!
//! Only peers listed in the cluster's configuration connect here, never clients: raft-rs's
//! protobuf 2.x decoder (advisory RUSTSEC-2024-0437, stack overflow on deeply nested input)
//! sees only peers' bytes. Sizes are still bounded so a broken peer cannot make this broker
//! allocate without limit.

use bytes::Bytes;
use protobuf::Message as _;
use raft::prelude::Message;

use super::cursor::Cursor;

/// 2: a raft message names its topic's id as well as its name, so that a message of a
/// deleted topic's group never reaches the group of a topic created again under the name.
const VERSION: u8 = 2;
/// The largest frame accepted: raft-rs's message size limit bounds what a peer sends.
pub const MAX_FRAME: usize = 64 << 20;

/// The raft group a message belongs to: a partition, or the metadata log.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId {
    pub topic: String,
    pub partition: i32,
    /// The topic's id (nil for the metadata log): a topic deleted and created again under
    /// its name has another.
    pub topic_id: uuid::Uuid,
}

impl GroupId {
    pub fn new(topic: &str, partition: i32) -> GroupId {
        GroupId { topic: topic.to_string(), partition, topic_id: uuid::Uuid::nil() }
    }

    pub fn with_topic_id(self, topic_id: uuid::Uuid) -> GroupId {
        GroupId { topic_id, ..self }
    }
}

/// One thing a frame carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Raft(GroupId, Message),
    /// A call to the receiver's controller (`cluster::calls`), answered by a `Reply` with
    /// the same id.
    Call(u64, bytes::Bytes),
    Reply(u64, bytes::Bytes),
}

const RAFT: u8 = 0;
const CALL: u8 = 1;
const REPLY: u8 = 2;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("frame version {0} is not one this broker speaks (upgrade the older broker)")]
    Version(u8),
    #[error("frame ends inside a message")]
    Truncated,
    #[error("topic name in a frame is not UTF-8")]
    Topic,
    #[error("raft message does not decode: {0}")]
    Message(String),
    #[error("unknown item kind {0} (upgrade the older broker)")]
    Kind(u8),
}

/// One frame from `from` holding `items`.
pub fn encode(from: u64, items: &[Item]) -> Vec<u8> {
    let mut f = Frame::new(from, items.iter().map(item_len).sum());
    items.iter().for_each(|item| f.push(item));
    f.finish()
}

/// Frames from `from` holding `items` in order, each within `MAX_FRAME` (a snapshot of a
/// compacted log can be megabytes, and many can go to one peer in one loop turn). An item
/// too large for any frame is left out and counted in the second value. Each item is
/// encoded straight into its frame: a leader's appends carry its batches, and every copy of
/// them here is paid per follower.
pub fn encode_frames(from: u64, items: &[Item]) -> (Vec<Vec<u8>>, usize) {
    let lens: Vec<usize> = items.iter().map(item_len).collect();
    let (mut frames, mut dropped) = (Vec::new(), 0);
    let mut current: Option<Frame> = None;
    for (i, (item, &len)) in items.iter().zip(&lens).enumerate() {
        if Frame::HEADER + len > MAX_FRAME {
            dropped += 1;
            continue;
        }
        if current.as_ref().is_some_and(|f| f.body_len() + len > MAX_FRAME) {
            frames.extend(current.take().map(Frame::finish));
        }
        let f = current.get_or_insert_with(|| Frame::new(from, lens[i..].iter().sum::<usize>().min(MAX_FRAME)));
        f.push(item);
    }
    frames.extend(current.map(Frame::finish));
    (frames, dropped)
}

/// A frame being written: its length and item count are filled in by `finish`.
struct Frame {
    b: Vec<u8>,
    count: u32,
}

impl Frame {
    /// Version, sender, item count.
    const HEADER: usize = 1 + 8 + 4;

    fn new(from: u64, items_len: usize) -> Frame {
        let mut b = Vec::with_capacity(4 + Self::HEADER + items_len);
        b.extend_from_slice(&[0; 4]);
        b.push(VERSION);
        b.extend_from_slice(&from.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        Frame { b, count: 0 }
    }

    /// The length the frame's prefix announces.
    fn body_len(&self) -> usize {
        self.b.len() - 4
    }

    fn push(&mut self, item: &Item) {
        write_item(item, &mut self.b);
        self.count += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.body_len() as u32;
        self.b[..4].copy_from_slice(&len.to_be_bytes());
        self.b[13..17].copy_from_slice(&self.count.to_be_bytes());
        self.b
    }
}

/// The bytes `write_item` writes for `item` (a raft message's size is computed here and
/// cached in it for the write).
fn item_len(item: &Item) -> usize {
    match item {
        Item::Raft(group, m) => 1 + 2 + group.topic.len() + 16 + 4 + 4 + m.compute_size() as usize,
        Item::Call(_, body) | Item::Reply(_, body) => 1 + 8 + 4 + body.len(),
    }
}

/// Appends `item` to `b`; a raft message's size must have been computed (`item_len`).
fn write_item(item: &Item, b: &mut Vec<u8>) {
    match item {
        Item::Raft(group, m) => {
            b.push(RAFT);
            b.extend_from_slice(&(group.topic.len() as u16).to_be_bytes());
            b.extend_from_slice(group.topic.as_bytes());
            b.extend_from_slice(group.topic_id.as_bytes());
            b.extend_from_slice(&group.partition.to_be_bytes());
            b.extend_from_slice(&m.get_cached_size().to_be_bytes());
            let mut os = protobuf::CodedOutputStream::vec(b);
            m.write_to_with_cached_sizes(&mut os).and_then(|()| os.flush()).expect("raft-rs messages always encode");
        }
        Item::Call(id, body) | Item::Reply(id, body) => {
            b.push(if matches!(item, Item::Call(..)) { CALL } else { REPLY });
            b.extend_from_slice(&id.to_be_bytes());
            b.extend_from_slice(&(body.len() as u32).to_be_bytes());
            b.extend_from_slice(body);
        }
    }
}

/// The length of the frame body that `prefix` (the frame's first 4 bytes) announces.
pub fn body_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

/// The sender and items of a frame body (the bytes after the length prefix).
pub fn decode(body: &Bytes) -> Result<(u64, Vec<Item>), FrameError> {
    let mut r = Cursor::new(&body[..], FrameError::Truncated);
    let version = r.take(1)?[0];
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let from = u64::from_be_bytes(r.array()?);
    let count = u32::from_be_bytes(r.array()?) as usize;
    // Each item takes at least 13 bytes: a count larger than that cannot be honest.
    let mut items = Vec::with_capacity(count.min(body.len() / 13));
    for _ in 0..count {
        let item = match r.take(1)?[0] {
            RAFT => {
                let topic_len = u16::from_be_bytes(r.array()?) as usize;
                let topic = std::str::from_utf8(r.take(topic_len)?).map_err(|_| FrameError::Topic)?.to_string();
                let topic_id = uuid::Uuid::from_bytes(r.array()?);
                let partition = i32::from_be_bytes(r.array()?);
                let len = u32::from_be_bytes(r.array()?) as usize;
                // Entries' data are slices of `body`, not copies.
                let m = Message::parse_from_carllerche_bytes(&body.slice_ref(r.take(len)?))
                    .map_err(|e| FrameError::Message(e.to_string()))?;
                Item::Raft(GroupId { topic, partition, topic_id }, m)
            }
            kind @ (CALL | REPLY) => {
                let id = u64::from_be_bytes(r.array()?);
                let len = u32::from_be_bytes(r.array()?) as usize;
                let body = body.slice_ref(r.take(len)?);
                if kind == CALL {
                    Item::Call(id, body)
                } else {
                    Item::Reply(id, body)
                }
            }
            kind => return Err(FrameError::Kind(kind)),
        };
        items.push(item);
    }
    Ok((from, items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::prelude::{Entry, MessageType};

    /// A frame's body, as the read loop hands it over.
    fn body(frame: &[u8]) -> Bytes {
        Bytes::copy_from_slice(&frame[4..])
    }

    fn sample() -> Vec<Item> {
        let mut append = Message { to: 2, from: 1, term: 3, index: 9, commit: 8, ..Default::default() };
        append.set_msg_type(MessageType::MsgAppend);
        append.entries =
            vec![Entry { index: 10, term: 3, data: Bytes::from_static(b"batch"), ..Default::default() }].into();
        let mut beat = Message { to: 2, from: 1, term: 3, ..Default::default() };
        beat.set_msg_type(MessageType::MsgHeartbeat);
        vec![
            Item::Raft(GroupId::new("orders", 4).with_topic_id(uuid::Uuid::from_u128(0x005e_ed0f_0dd5)), append),
            Item::Call(7, Bytes::from_static(b"{}")),
            Item::Raft(GroupId::new("__cluster_metadata", 0), beat),
            Item::Reply(7, Bytes::new()),
        ]
    }

    #[test]
    fn messages_of_many_groups_travel_in_one_frame() {
        let msgs = sample();
        let frame = encode(1, &msgs);
        let len = body_len(frame[..4].try_into().unwrap()).unwrap();
        assert_eq!(len, frame.len() - 4);
        assert_eq!(decode(&body(&frame)).unwrap(), (1, msgs));
        assert_eq!(decode(&body(&encode(7, &[]))).unwrap(), (7, vec![]));
    }

    #[test]
    fn items_beyond_one_frames_limit_go_in_several_and_one_too_large_is_left_out() {
        let big = |id, n| Item::Call(id, Bytes::from(vec![7u8; n]));
        let items = vec![big(1, MAX_FRAME / 2), big(2, MAX_FRAME / 2), Item::Reply(3, Bytes::new()), big(4, MAX_FRAME)];
        let (frames, too_large) = encode_frames(5, &items);
        assert_eq!((frames.len(), too_large), (2, 1));
        let mut got = Vec::new();
        for f in &frames {
            assert!(body_len(f[..4].try_into().unwrap()).is_ok(), "every frame is within the limit");
            let (from, items) = decode(&body(f)).unwrap();
            assert_eq!(from, 5);
            got.extend(items);
        }
        assert_eq!(got, items[..3], "in order, nothing but the too large one lost");
        let (one, _) = encode_frames(1, &sample());
        assert_eq!(one, vec![encode(1, &sample())]);
    }

    #[test]
    fn a_broken_frame_is_an_error_never_a_panic() {
        let frame = encode(1, &sample());
        for cut in 0..frame.len() - 4 {
            assert!(decode(&body(&frame[..4 + cut])).is_err(), "cut at {cut}");
        }
        let mut v = frame.clone();
        v[4] = 9;
        assert_eq!(decode(&body(&v)), Err(FrameError::Version(9)));
        assert_eq!(body_len((MAX_FRAME as u32 + 1).to_be_bytes()), Err(FrameError::TooLarge(MAX_FRAME + 1)));
        // A count far beyond the bytes present allocates nothing and fails.
        let mut lying = encode(1, &[]);
        lying[13..17].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode(&body(&lying)), Err(FrameError::Truncated));
        let mut unknown = encode(1, &sample());
        unknown[17] = 9;
        assert_eq!(decode(&body(&unknown)), Err(FrameError::Kind(9)));
    }
}
