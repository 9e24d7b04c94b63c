//! The record-batch validator, with the length and CRC fields made consistent half of the
//! time so the fuzzer gets past the checksum into the header and record checks.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ringbroker::api::inspect::batch(data, 1 << 20));
