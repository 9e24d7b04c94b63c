//! The Apache Kafka Java client and Kafka's own tools against the broker, through the Maven
//! harness in `tests/java` (`support::java`): produce and consume with every codec, consumer
//! groups, fetch sessions over many partitions, idempotence through a lossy proxy and across
//! kill -9, crash safety, TLS, SASL and ACLs, the admin tools (`kafka-topics`,
//! `kafka-configs`, ...), Kafka Streams over compacted changelogs and Kafka Connect.

mod admin_tools;
mod cluster_java;
mod connect_java;
mod crash_java;
mod fetch_sessions_java;
mod groups_java;
mod idempotence_java;
mod java_interop;
mod machine;
mod security_java;
mod streams_java;
