//! Connections: framing, pipelining with in-order responses, and sending responses (bytes
//! and, for fetches, file regions with sendfile). This layer knows frames, not APIs: the
//! server hands it a dispatch function.

pub mod connection;
pub mod sendfile;
