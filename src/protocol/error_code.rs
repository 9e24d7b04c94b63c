//! Kafka error codes: data inside responses, never a broker fault. The generated codec's
//! table is used as is; `code()` gives the wire value.

pub use proto_kafka::ResponseError as ErrorCode;

/// The wire value of an optional error (0 = none).
pub fn code(e: Option<ErrorCode>) -> i16 {
    e.map_or(0, |e| e.code())
}
