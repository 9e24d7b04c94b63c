//! The Fetch response, written by hand rather than by the generated codec, because its record
//! sets are not in memory: each is a region of a segment file that the connection sends with
//! sendfile. Everything around the records is encoded here, version by version (4–18), into
//! byte chunks that alternate with the file regions.
//!
//! Layout (flexible = v12+: compact arrays/strings/bytes and tagged-field sections):
//! throttle_time_ms i32 | v7+: error_code i16, session_id i32 | topics[ v13+: topic_id uuid,
//! else name | partitions[ index i32, error i16, high_watermark i64, last_stable_offset i64,
//! v5+: log_start_offset i64, aborted_transactions (null), v11+: preferred_read_replica i32,
//! records bytes | tags ] | tags ] | tags
//!
//! KIP-951 hints, v16+ only (as Kafka's clients read them): a partition's tag 1 is its
//! current leader (leader_id i32, leader_epoch i32, tags), the response's tag 0 the
//! endpoints of the brokers named there (node_id i32, host, port i32, rack nullable, tags).

use bytes::{BufMut, BytesMut};

use super::response::{finish_frame, start_frame, Chunk, FileRegion, Response};

pub const MIN_VERSION: i16 = 4;
pub const MAX_VERSION: i16 = 18;

#[derive(Debug)]
pub struct PartitionOut {
    pub index: i32,
    pub error: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub records: Option<FileRegion>,
    /// KIP-951: (leader id, leader epoch) of a partition this broker does not lead.
    pub current_leader: Option<(i32, i32)>,
}

/// A broker a KIP-951 hint names, as the response's node endpoints list it.
#[derive(Debug, Clone)]
pub struct NodeEndpoint {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

#[derive(Debug)]
pub struct TopicOut {
    pub name: String,
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionOut>,
}

#[derive(Debug)]
pub struct FetchOut {
    pub throttle_time_ms: i32,
    pub error: i16,
    pub session_id: i32,
    pub topics: Vec<TopicOut>,
    /// KIP-951: the brokers the partitions' current-leader hints name.
    pub node_endpoints: Vec<NodeEndpoint>,
}

fn put_compact_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(buf, 0),
        Some(s) => {
            put_uvarint(buf, s.len() as u32 + 1);
            buf.put_slice(s.as_bytes());
        }
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn put_array_len(buf: &mut BytesMut, flexible: bool, n: usize) {
    if flexible {
        put_uvarint(buf, n as u32 + 1);
    } else {
        buf.put_i32(n as i32);
    }
}

pub fn encode(version: i16, correlation_id: i32, out: &FetchOut) -> Response {
    debug_assert!((MIN_VERSION..=MAX_VERSION).contains(&version));
    let flexible = version >= 12;
    let mut chunks = Vec::new();
    let mut buf = BytesMut::with_capacity(256);
    start_frame(&mut buf, correlation_id, if flexible { 1 } else { 0 });
    buf.put_i32(out.throttle_time_ms);
    if version >= 7 {
        buf.put_i16(out.error);
        buf.put_i32(out.session_id);
    }
    put_array_len(&mut buf, flexible, out.topics.len());
    for t in &out.topics {
        if version >= 13 {
            buf.put_slice(t.id.as_bytes());
        } else if flexible {
            put_uvarint(&mut buf, t.name.len() as u32 + 1);
            buf.put_slice(t.name.as_bytes());
        } else {
            buf.put_i16(t.name.len() as i16);
            buf.put_slice(t.name.as_bytes());
        }
        put_array_len(&mut buf, flexible, t.partitions.len());
        for p in &t.partitions {
            buf.put_i32(p.index);
            buf.put_i16(p.error);
            buf.put_i64(p.high_watermark);
            buf.put_i64(p.last_stable_offset);
            if version >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            // aborted_transactions: null (no transactions are ever aborted here)
            if flexible {
                put_uvarint(&mut buf, 0);
            } else {
                buf.put_i32(-1);
            }
            if version >= 11 {
                buf.put_i32(-1); // preferred_read_replica: none
            }
            let len = p.records.as_ref().map_or(0, |r| r.len);
            if flexible {
                put_uvarint(&mut buf, len + 1);
            } else {
                buf.put_i32(len as i32);
            }
            if let Some(region) = &p.records {
                if region.len > 0 {
                    chunks.push(Chunk::Bytes(buf.split().freeze()));
                    chunks.push(Chunk::File(region.clone()));
                }
            }
            match p.current_leader.filter(|_| version >= 16) {
                Some((leader_id, leader_epoch)) => {
                    put_uvarint(&mut buf, 1); // one tagged field:
                    put_uvarint(&mut buf, 1); // CurrentLeader
                    put_uvarint(&mut buf, 9);
                    buf.put_i32(leader_id);
                    buf.put_i32(leader_epoch);
                    put_uvarint(&mut buf, 0);
                }
                None if flexible => put_uvarint(&mut buf, 0), // partition tags
                None => {}
            }
        }
        if flexible {
            put_uvarint(&mut buf, 0); // topic tags
        }
    }
    if version >= 16 && !out.node_endpoints.is_empty() {
        let mut nodes = BytesMut::new();
        put_array_len(&mut nodes, true, out.node_endpoints.len());
        for n in &out.node_endpoints {
            nodes.put_i32(n.node_id);
            put_compact_str(&mut nodes, Some(&n.host));
            nodes.put_i32(n.port);
            put_compact_str(&mut nodes, n.rack.as_deref());
            put_uvarint(&mut nodes, 0);
        }
        put_uvarint(&mut buf, 1); // one tagged field:
        put_uvarint(&mut buf, 0); // NodeEndpoints
        put_uvarint(&mut buf, nodes.len() as u32);
        buf.put_slice(&nodes);
    } else if flexible {
        put_uvarint(&mut buf, 0); // response tags
    }
    chunks.push(Chunk::Bytes(buf.split().freeze()));
    // The size prefix sits at the start of the first chunk; patch it now that all is known.
    let total: usize = chunks.iter().map(Chunk::len).sum();
    if let Some(Chunk::Bytes(first)) = chunks.first_mut() {
        let mut b = BytesMut::from(&first[..]);
        let extra = total - b.len();
        finish_frame(&mut b, extra);
        *first = b.freeze();
    }
    Response { chunks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proto_kafka::messages::FetchResponse;
    use proto_kafka::protocol::Decodable;
    use std::io::Write;
    use std::sync::Arc;

    /// Flattens a response (reading file regions) and decodes it with the generated codec.
    fn roundtrip(version: i16, out: &FetchOut) -> FetchResponse {
        let resp = encode(version, 42, out);
        let mut flat = Vec::new();
        for c in &resp.chunks {
            match c {
                Chunk::Bytes(b) => flat.extend_from_slice(b),
                Chunk::File(r) => {
                    use std::os::unix::fs::FileExt;
                    let mut v = vec![0; r.len as usize];
                    r.file.read_exact_at(&mut v, r.pos).unwrap();
                    flat.extend_from_slice(&v);
                }
            }
        }
        let size = i32::from_be_bytes(flat[0..4].try_into().unwrap()) as usize;
        assert_eq!(size, flat.len() - 4, "size prefix");
        assert_eq!(i32::from_be_bytes(flat[4..8].try_into().unwrap()), 42);
        let body_at = if version >= 12 { 9 } else { 8 };
        let mut body = Bytes::copy_from_slice(&flat[body_at..]);
        let r = FetchResponse::decode(&mut body, version).unwrap();
        assert!(body.is_empty(), "trailing bytes at v{version}");
        r
    }

    #[test]
    fn every_version_decodes_with_the_generated_codec() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"xxxxRECORDSyyyy").unwrap();
        let file = Arc::new(f);
        let id = uuid::Uuid::from_u128(0x1234);
        for v in MIN_VERSION..=MAX_VERSION {
            let out = FetchOut {
                throttle_time_ms: 1234,
                error: 0,
                session_id: 0,
                topics: vec![TopicOut {
                    name: "orders".into(),
                    id,
                    partitions: vec![
                        PartitionOut {
                            index: 0,
                            error: 0,
                            high_watermark: 10,
                            last_stable_offset: 10,
                            log_start_offset: 0,
                            records: Some(FileRegion { file: file.clone(), pos: 4, len: 7 }),
                            current_leader: None,
                        },
                        PartitionOut {
                            index: 1,
                            error: 1,
                            high_watermark: 5,
                            last_stable_offset: 5,
                            log_start_offset: 2,
                            records: None,
                            current_leader: Some((3, 7)),
                        },
                    ],
                }],
                node_endpoints: vec![NodeEndpoint {
                    node_id: 3,
                    host: "h3".into(),
                    port: 9093,
                    rack: Some("r1".into()),
                }],
            };
            let r = roundtrip(v, &out);
            assert_eq!(r.throttle_time_ms, 1234, "v{v}");
            let t = &r.responses[0];
            if v >= 13 {
                assert_eq!(t.topic_id, id);
            } else {
                assert_eq!(t.topic.as_str(), "orders");
            }
            assert_eq!(t.partitions[0].records.as_deref(), Some(&b"RECORDS"[..]), "v{v}");
            assert_eq!(t.partitions[0].high_watermark, 10);
            assert_eq!(t.partitions[1].error_code, 1);
            if v >= 5 {
                assert_eq!(t.partitions[1].log_start_offset, 2);
            }
            // KIP-951 hints from v16; earlier versions carry none (they would be unknown tags).
            let hint = &t.partitions[1].current_leader;
            let nodes: Vec<(i32, String, i32, Option<String>)> = r
                .node_endpoints
                .iter()
                .map(|n| (n.node_id.0, n.host.to_string(), n.port, n.rack.as_ref().map(|r| r.to_string())))
                .collect();
            if v >= 16 {
                assert_eq!((hint.leader_id.0, hint.leader_epoch), (3, 7), "v{v}");
                assert_eq!(nodes, vec![(3, "h3".to_string(), 9093, Some("r1".to_string()))], "v{v}");
            } else {
                assert_eq!(hint.leader_id.0, -1, "v{v}");
                assert!(nodes.is_empty(), "v{v}");
            }
            assert_eq!(t.partitions[0].current_leader.leader_id.0, -1, "no hint without an error");
        }
    }
}
