//! Replacing old segments with the cleaned ones, crash-safe. The order of what reaches the
//! disk:
//!
//! 1. (the cleaning) each new segment's log and indexes are written and fsynced in
//!    `cleaner.tmp/`, then that directory is fsynced;
//! 2. the manifest `cleaner-swap`, naming each new segment and the old ones it replaces, is
//!    written atomically (temporary file, fsync, rename, fsync of the directory): the commit
//!    point;
//! 3. the old segments' files are removed and the new ones renamed into the partition's
//!    directory (a new segment takes its first old segment's name), then the directory is
//!    fsynced;
//! 4. the manifest is removed (fsynced), then `cleaner.tmp/`.
//!
//! A crash before 2 leaves the old segments whole: the next open removes `cleaner.tmp/`.
//! A crash after 2 leaves the manifest: the next open does 3 and 4 again, which only
//! removes what is still there and renames what is still in `cleaner.tmp/`. Either way the
//! log holds the old segments or the new ones, never some of each.

use std::io;
use std::path::Path;

use super::pass::{NewSegment, TMP_DIR};
use crate::log::segment;
use crate::storage;

/// The manifest's name in the partition's directory.
pub const MANIFEST: &str = "cleaner-swap";

const EXTS: [&str; 3] = ["index", "timeindex", "log"];

fn encode(segments: &[NewSegment]) -> String {
    let mut out = String::new();
    for s in segments {
        let olds: Vec<String> = s.replaces.iter().map(i64::to_string).collect();
        out.push_str(&format!("{} {}\n", s.base, olds.join(",")));
    }
    out
}

fn decode(text: &str) -> io::Result<Vec<NewSegment>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("not a cleaner manifest: {text:?}"));
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (base, olds) = line.split_once(' ').ok_or_else(bad)?;
        let base = base.parse().map_err(|_| bad())?;
        let replaces = olds.split(',').map(|o| o.parse().map_err(|_| bad())).collect::<io::Result<Vec<i64>>>()?;
        out.push(NewSegment { base, replaces, size: 0 });
    }
    Ok(out)
}

/// Steps 2 to 4: commits the cleaned segments in `cleaner.tmp/` and puts them in place.
pub fn commit(dir: &Path, segments: &[NewSegment]) -> io::Result<()> {
    storage::write_atomic(&dir.join(MANIFEST), encode(segments).as_bytes(), 0o644)?;
    complete(dir, segments)
}

/// Steps 3 and 4, which may run again after a crash part way.
fn complete(dir: &Path, segments: &[NewSegment]) -> io::Result<()> {
    let tmp = dir.join(TMP_DIR);
    for s in segments {
        for old in s.replaces.iter().filter(|b| **b != s.base) {
            for ext in EXTS {
                storage::remove_file(&dir.join(segment::file_name(*old, ext)))?;
            }
        }
        for ext in EXTS {
            let name = segment::file_name(s.base, ext);
            if tmp.join(&name).exists() {
                storage::rename(&tmp.join(&name), &dir.join(&name))?;
            }
        }
    }
    storage::sync_dir(dir)?;
    storage::remove_file(&dir.join(MANIFEST))?;
    storage::sync_dir(dir)?;
    if tmp.exists() {
        storage::remove_dir_all(&tmp)?;
    }
    Ok(())
}

/// At open, before the segments are listed: finishes a committed swap, or removes what an
/// uncommitted cleaning left. Returns whether a swap was finished.
pub fn recover(dir: &Path) -> io::Result<bool> {
    let manifest = dir.join(MANIFEST);
    if let Some(bytes) = storage::read(&manifest)? {
        let segments = decode(&String::from_utf8_lossy(&bytes))?;
        complete(dir, &segments)?;
        return Ok(true);
    }
    let tmp = dir.join(TMP_DIR);
    if tmp.exists() {
        storage::remove_dir_all(&tmp)?;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_round_trips() {
        let segs = vec![
            NewSegment { base: 0, replaces: vec![0, 10, 20], size: 0 },
            NewSegment { base: 30, replaces: vec![30], size: 0 },
        ];
        assert_eq!(decode(&encode(&segs)).unwrap(), segs);
        assert!(decode("x y").is_err());
    }
}
