//! Connections: framing, pipelining with in-order responses, and sending responses (bytes
//! and, for fetches, file regions with sendfile). This layer knows frames, not APIs: the
//! server hands it a dispatch function. Limits: the broker-wide and per-IP connection caps
//! (`admission`), the rate of new connections (`creation_rate`), the frame size, in-flight requests and the idle timeout (`connection`), and the
//! memory budgets for request bytes (`memory`).

pub mod admission;
pub mod connection;
pub mod creation_rate;
pub mod memory;
pub mod sendfile;
pub mod tls;
