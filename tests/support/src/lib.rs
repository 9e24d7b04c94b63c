//! What the integration test binaries (`tests/<binary>/main.rs`) share: the broker process
//! and its metrics page (`broker`), a cluster of them (`cluster`) and the faults on its links (`link`), the test client over the library's own
//! (`client`), brokers with secured listeners (`security`) and their certificates (`tls`), a
//! proxy that loses chosen responses (`proxy`) and the Java client harness (`java`).

pub mod broker;
pub mod client;
pub mod cluster;
pub mod java;
pub mod link;
pub mod proxy;
pub mod security;
pub mod tls;

pub use broker::{log_bytes, metric_sum, restart, scrape, Broker};
