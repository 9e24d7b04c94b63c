//! A response ready to be written: bytes, and for Fetch, regions of segment files that the
//! connection sends file→socket with sendfile. The 4-byte size prefix is always part of the
//! first chunk.

use std::fs::File;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use proto_kafka::messages::ApiKey;
use proto_kafka::protocol::{Encodable, HeaderVersion};

use super::fit::Fit;

/// `len` bytes of `file` from `pos`. The `Arc` keeps a deleted segment's descriptor valid
/// until the last response that references it has been sent.
#[derive(Clone, Debug)]
pub struct FileRegion {
    pub file: Arc<File>,
    pub pos: u64,
    pub len: u32,
}

#[derive(Debug)]
pub enum Chunk {
    Bytes(Bytes),
    File(FileRegion),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::File(f) => f.len as usize,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A whole response frame, size prefix included.
#[derive(Debug)]
pub struct Response {
    pub chunks: Vec<Chunk>,
}

impl Response {
    pub fn total_len(&self) -> usize {
        self.chunks.iter().map(Chunk::len).sum()
    }
}

/// Writes the response header (correlation id, plus an empty tagged-field section for the
/// flexible header v1) after a placeholder size prefix.
pub fn start_frame(buf: &mut BytesMut, correlation_id: i32, header_version: i16) {
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    if header_version >= 1 {
        buf.put_u8(0);
    }
}

/// Fills in the size prefix once the frame is complete; `extra` counts bytes that follow in
/// file regions.
pub fn finish_frame(buf: &mut BytesMut, extra: usize) {
    let size = (buf.len() - 4 + extra) as i32;
    buf[0..4].copy_from_slice(&size.to_be_bytes());
}

/// Encodes a generated response message into a frame, after fitting it to `version` (see
/// `fit`): the one place every generated response passes through on its way out.
pub fn encode<M: Encodable + HeaderVersion + Fit>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    mut msg: M,
) -> Result<Response, proto_kafka::ProtoError> {
    msg.fit(version);
    // ApiVersions always answers with header v0 so that a client that sent an unsupported
    // (too new) version can still read the response.
    let header_version = if api == ApiKey::ApiVersions { 0 } else { M::header_version(version) };
    let size = msg.compute_size(version)?;
    let mut buf = BytesMut::with_capacity(9 + size);
    start_frame(&mut buf, correlation_id, header_version);
    msg.encode(&mut buf, version)?;
    finish_frame(&mut buf, 0);
    Ok(Response { chunks: vec![Chunk::Bytes(buf.freeze())] })
}
