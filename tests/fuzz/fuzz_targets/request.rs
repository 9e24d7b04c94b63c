//! One request frame (no size prefix): preamble, version, header, body decoder of every API
//! the broker serves, and Produce's record batches.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ringbroker::api::inspect::inspect(bytes::Bytes::copy_from_slice(data), 1 << 20);
});
