//! The broker on the wire, spoken to with the tests' own client (`support::client`): the
//! protocol API by API, the sweep of every advertised version, hostile and slow clients,
//! connection limits, the metrics page, quotas, ACLs, the SASL and TLS layers, and the fuzz
//! corpus replayed. Each test starts its own broker on port 0.

mod authorization;
mod connection_limits;
mod fuzz_corpus;
mod hostile_clients;
mod metrics;
mod protocol;
mod quotas;
mod security_wire;
mod versions;
