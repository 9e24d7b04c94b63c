//! More client ecosystems as programs of their own against the broker: kcat, kafka-python and
//! kafkajs (installed by `tests/clients/setup.sh`): a scenario each against one broker, and all
//! three reading a compacted topic that a three-broker cluster cleaned.

mod clients;
