//! Snapshots of a partition's idempotent-producer state, `<offset, 20 digits>.snapshot`
//! (JSON of `producer::ProducerState`) covering every batch before `offset`. Written when a
//! segment rolls and at a clean close; at open the newest usable snapshot is loaded and only
//! the batches after it are rescanned (headers only), so recovery never reads the whole log.
//! The two newest snapshots are kept.

use std::io;
use std::path::Path;

use super::segment::Segment;
use crate::producer::ProducerState;

const EXT: &str = "snapshot";
const KEEP: usize = 2;

fn list(dir: &Path) -> io::Result<Vec<(i64, std::path::PathBuf)>> {
    let mut out = Vec::new();
    for p in crate::storage::list(dir)? {
        if p.extension().is_some_and(|x| x == EXT) {
            if let Some(off) = p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<i64>().ok()) {
                out.push((off, p));
            }
        }
    }
    out.sort_by_key(|(o, _)| std::cmp::Reverse(*o));
    Ok(out)
}

pub fn write(dir: &Path, offset: i64, state: &ProducerState) -> io::Result<()> {
    let path = dir.join(format!("{offset:020}.{EXT}"));
    crate::storage::write_atomic(&path, &serde_json::to_vec(state).map_err(io::Error::other)?, 0o644)?;
    for (_, old) in list(dir)?.into_iter().skip(KEEP) {
        let _ = crate::storage::remove_file(&old);
    }
    Ok(())
}

/// Removes the snapshots past `offset`: the log was cut there, and they describe batches
/// it no longer holds.
pub fn discard_after(dir: &Path, offset: i64) -> io::Result<()> {
    for (_, path) in list(dir)?.into_iter().filter(|(o, _)| *o > offset) {
        crate::storage::remove_file(&path)?;
    }
    Ok(())
}

/// The producer state at `log_end`: the newest snapshot not past the log end (a snapshot
/// beyond it belongs to data a crash took back), then every batch after it.
pub fn recover(dir: &Path, segments: &[Segment], log_end: i64, now_ms: i64) -> io::Result<ProducerState> {
    let log_start = segments.first().map_or(0, |s| s.base_offset);
    let mut start = (log_start, ProducerState::default());
    for (off, path) in list(dir)? {
        if off > log_end || off < log_start {
            continue;
        }
        match crate::storage::read(&path).ok().flatten().and_then(|b| serde_json::from_slice::<ProducerState>(&b).ok())
        {
            Some(state) => {
                start = (off, state);
                break;
            }
            None => tracing::warn!(path = %path.display(), "ignoring an unreadable producer snapshot"),
        }
    }
    let (from, mut state) = start;
    let now = now_ms;
    for seg in segments.iter().filter(|s| s.next_offset.get() > from) {
        // Everything written counts, committed or not: a replicated log's tail may not be
        // committed yet, and a standalone log's is (recovery sets committed to size).
        let end = seg.size.get();
        let mut pos = match seg.find_before(from.max(seg.base_offset), end)? {
            Some((pos, _)) => pos,
            None => continue,
        };
        while let Some(h) = seg.header_at(pos, end)? {
            if h.base_offset >= from {
                state.update(&h, now);
            }
            pos += h.size as u64;
        }
    }
    Ok(state)
}
