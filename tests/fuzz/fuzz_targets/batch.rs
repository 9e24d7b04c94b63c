//! The record-batch validator and the rewrites an append may make (bounded decompression,
//! recompression into another codec, LogAppendTime stamping), with the length and CRC fields
//! made consistent half of the time so the fuzzer gets past the checksum; see
//! `ringbroker::api::inspect::batch` for how the first byte steers.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ringbroker::api::inspect::batch(data, 1 << 20));
