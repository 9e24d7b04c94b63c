//! ringbench: a load tool for Kafka-compatible brokers. It speaks the Kafka protocol itself
//! (the broker's own codec), drives producers and consumers over plain blocking sockets with
//! pipelined requests, and reports what OpenMessaging Benchmark reports: publish rate,
//! publish and end-to-end latency percentiles, and publish delay (how late sends left against
//! a fixed-rate schedule, i.e. coordinated omission made visible), from HDR histograms.

pub mod cpu;
pub mod null_broker;
pub mod records;
pub mod report;
pub mod run;
pub mod schedule;
pub mod spread;
pub mod stats;

pub use run::{run, run_with, ClusterConfig, Config};
