//! The Kafka wire protocol, without I/O: framing, request headers, the record-batch view and
//! the response writers. General message bodies come from the generated codec
//! (`proto-kafka`, a fork of kafka-protocol that checks array counts against the bytes left
//! before allocating: kafka-protocol 0.18 aborts on a 4-byte Metadata body declaring
//! 0x7fffffff topics). The Fetch response is written here by hand so its records can be
//! sent from files (`fetch_writer`).

pub mod batch;
pub mod compression;
pub mod error_code;
pub mod fetch_writer;
pub mod fit;
pub mod frame;
pub mod header;
pub mod response;
pub mod throttle;

pub use error_code::ErrorCode;
pub use proto_kafka::messages;
pub use proto_kafka::protocol::{Decodable, Encodable, StrBytes};
/// Record batches with compression (gzip, snappy, lz4, zstd), for the admin tools and ringbench.
pub use proto_kafka::records;

#[cfg(test)]
mod hostile_input {
    use bytes::Bytes;
    use proto_kafka::messages::MetadataRequest;
    use proto_kafka::protocol::Decodable;

    /// The input that makes kafka-protocol 0.18 abort: a Metadata v1 body whose topic array
    /// claims i32::MAX entries. The codec must return an error instead.
    #[test]
    fn huge_array_count_is_an_error_not_an_abort() {
        let mut body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(MetadataRequest::decode(&mut body, 1).is_err());
        let mut body = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(MetadataRequest::decode(&mut body, 12).is_err());
    }
}
