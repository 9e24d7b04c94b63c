//! The request header: the first 8 bytes (api key, version, correlation id) are fixed in every
//! version, which is what a broker needs to answer even a request it cannot parse further.

use bytes::Bytes;
use proto_kafka::messages::{ApiKey, RequestHeader};
use proto_kafka::protocol::Decodable;

/// The fixed start of every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

pub fn preamble(frame: &[u8]) -> Option<Preamble> {
    let b = frame.get(..8)?;
    Some(Preamble {
        api_key: i16::from_be_bytes([b[0], b[1]]),
        api_version: i16::from_be_bytes([b[2], b[3]]),
        correlation_id: i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    })
}

/// Parses the full header of a request whose api key is known; returns it with the body.
pub fn parse(api: ApiKey, version: i16, mut frame: Bytes) -> Result<(RequestHeader, Bytes), proto_kafka::ProtoError> {
    // Versions newer than the codec knows (e.g. a future ApiVersions) use the flexible
    // header, as every API has since KIP-482.
    let known = api.valid_versions();
    let header_version = if version > known.max { 2 } else { api.request_header_version(version) };
    let header = RequestHeader::decode(&mut frame, header_version)?;
    Ok((header, frame))
}
