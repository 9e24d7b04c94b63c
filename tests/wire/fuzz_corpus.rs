//! Replays the fuzz corpus (`tests/fuzz/corpus/<target>/`) through the same entry points the
//! cargo-fuzz targets call, on the stable toolchain: every input the fuzzer kept (including
//! any that once crashed, added after their fix) must still come back without a panic.

use std::path::Path;

use ringbroker::api::inspect;

/// Every file of one target's corpus; the corpus must not be empty (it is committed).
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the {target} corpus in {} is empty", dir.display());
    files.into_iter().map(|p| (p.display().to_string(), std::fs::read(&p).expect("corpus file"))).collect()
}

#[test]
fn the_frame_corpus_replays() {
    for (name, data) in corpus("frame") {
        println!("{name}");
        inspect::frames(&data, 1 << 16);
    }
}

#[test]
fn the_request_corpus_replays() {
    let mut decoded = 0;
    for (name, data) in corpus("request") {
        println!("{name}");
        decoded += usize::from(inspect::inspect(bytes::Bytes::from(data), 1 << 20).is_ok());
    }
    // The fuzzer keeps inputs that reach new code, and some of them are whole valid requests.
    assert!(decoded > 0, "no request in the corpus decodes: the corpus no longer matches the decoders");
}

#[test]
fn the_batch_corpus_replays() {
    for (name, data) in corpus("batch") {
        println!("{name}");
        inspect::batch(&data, 1 << 20);
    }
}

#[test]
fn the_sasl_corpus_replays() {
    for (name, data) in corpus("sasl") {
        println!("{name}");
        inspect::sasl(&data);
    }
}
