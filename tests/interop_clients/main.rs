//! More client ecosystems as programs of their own against the broker: kcat, kafka-python,
//! kafkajs, franz-go and sarama (installed by `tests/clients/setup.sh`): a scenario each
//! against one broker, and all of them reading a compacted topic that a three-broker cluster
//! cleaned.

mod clients;
