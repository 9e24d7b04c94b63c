//! Small broker files written whole: the catalog, producer-id reservations, producer-state
//! snapshots and a partition's log start offset. Each is replaced atomically, so a crash
//! leaves either the old contents or the new ones: write a temporary file beside it, fsync
//! it, rename it over the old one, fsync the directory (without that last step the rename
//! itself may be lost).

use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Replaces `path` with `bytes`, durably; the file gets permission bits `mode`.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use super::faults::{hit, Op};
    hit(Op::Write, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp_name = path.file_name().ok_or_else(|| io::Error::other("no file name"))?.to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&tmp)?;
    // A temp file left by an earlier crash keeps its old mode through `open`: set it.
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.write_all(bytes)?;
    hit(Op::Sync, path)?;
    f.sync_all()?;
    hit(Op::Rename, path)?;
    std::fs::rename(&tmp, path)?;
    super::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one", 0o644).unwrap();
        write_atomic(&path, b"two", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")], "no temporary file is left");
    }
}
