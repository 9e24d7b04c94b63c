//! The SASL mechanisms' token parsers (PLAIN, SCRAM-SHA-256/512 client-first and
//! client-final), the input an unauthenticated client controls.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ringbroker::api::inspect::sasl(data));
