//! More client ecosystems as programs of their own against the broker: kcat, kafka-python and
//! kafkajs (installed by `tests/clients/setup.sh`).

mod clients;
