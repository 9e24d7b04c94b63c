//! The frame reader: a size prefix checked against the limit before any buffer grows, then
//! whatever follows taken apart as a request.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ringbroker::api::inspect::frames(data, 1 << 16));
