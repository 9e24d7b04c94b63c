//! librdkafka (the `rdkafka` crate, built from source) against the broker: produce and
//! consume with every codec, consumer groups and committed offsets, idempotence through a
//! lossy proxy, TLS and SASL, and Kafka's consumer-groups tool over a group of librdkafka
//! members. The client setup they share is in `librdkafka`.

mod cluster_rdkafka;
mod groups_rdkafka;
mod groups_tool;
mod idempotence_rdkafka;
mod librdkafka;
mod machine;
mod rdkafka_interop;
mod security_rdkafka;
