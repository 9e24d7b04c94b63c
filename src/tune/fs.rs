//! The tuners' only door to the machine's files. Every tuner names system paths
//! (`/proc/sys/vm/swappiness`) and reaches them through [`Fs`], so a test points the whole
//! tuner at a fake `/proc` and `/sys` built in a temp dir, or wraps the real thing to inject
//! a failing write.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Reads and writes system files below a root. Errors name the file as found on this machine.
pub trait Fs {
    /// The file's text, trailing newline and spaces removed.
    fn read(&self, path: &Path) -> io::Result<String>;
    /// Writes `value` to an existing file (as `echo value > path` would, without creating it:
    /// a missing `/proc` or `/sys` file means the kernel lacks the setting).
    fn write(&self, path: &Path, value: &str) -> io::Result<()>;
    /// Names in a directory, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> bool;
    /// The system path with every symlink followed (for `/sys/dev/block/MAJ:MIN`).
    fn resolve(&self, path: &Path) -> io::Result<PathBuf>;
    /// (major, minor) of the device holding `path`, or of its nearest existing ancestor
    /// (a data directory may not exist before the broker's first start).
    fn device_of(&self, path: &Path) -> io::Result<(u64, u64)>;
    /// Where `path` really is: what an error message or a rendered script should name.
    fn shown(&self, path: &Path) -> PathBuf;
}

/// The real filesystem seen from `root` (`/` on a live machine).
pub struct RootFs {
    root: PathBuf,
}

impl RootFs {
    pub fn new(root: &Path) -> io::Result<RootFs> {
        let root =
            root.canonicalize().map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", root.display())))?;
        Ok(RootFs { root })
    }

    fn named(&self, path: &Path, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", self.shown(path).display()))
    }
}

impl Fs for RootFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        let text = std::fs::read_to_string(self.shown(path)).map_err(|e| self.named(path, e))?;
        Ok(text.trim_end().to_string())
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        use std::io::Write;
        // One write(2) of the whole value: /proc and /sys parse each write on its own.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.shown(path))
            .map_err(|e| self.named(path, e))?;
        file.write_all(format!("{value}\n").as_bytes()).map_err(|e| self.named(path, e))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(self.shown(dir)).map_err(|e| self.named(dir, e))? {
            names.push(entry.map_err(|e| self.named(dir, e))?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        self.shown(path).exists()
    }

    fn resolve(&self, path: &Path) -> io::Result<PathBuf> {
        let real = self.shown(path).canonicalize().map_err(|e| self.named(path, e))?;
        let inside = real.strip_prefix(&self.root).map_err(|_| {
            let msg = format!("{} leads outside {} (to {})", path.display(), self.root.display(), real.display());
            io::Error::new(io::ErrorKind::InvalidData, msg)
        })?;
        Ok(Path::new("/").join(inside))
    }

    fn device_of(&self, path: &Path) -> io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let mut at = self.shown(path);
        loop {
            match std::fs::metadata(&at) {
                Ok(meta) => return Ok((nix::sys::stat::major(meta.dev()), nix::sys::stat::minor(meta.dev()))),
                Err(e) if e.kind() == io::ErrorKind::NotFound && at.pop() => continue,
                Err(e) => return Err(self.named(path, e)),
            }
        }
    }

    fn shown(&self, path: &Path) -> PathBuf {
        // Only normal components: `..` in a tuner path must not climb out of the root.
        let rel: PathBuf = path.components().filter(|c| matches!(c, Component::Normal(_))).collect();
        self.root.join(rel)
    }
}

/// Whether an error means the file is simply not there (a kernel without the feature).
pub fn missing(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_under_the_root_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RootFs::new(dir.path()).unwrap();
        let root = dir.path().canonicalize().unwrap();
        assert_eq!(fs.shown(Path::new("/proc/../sys/x")), root.join("proc/sys/x"));
        let e = fs.read(Path::new("/proc/sys/vm/swappiness")).unwrap_err();
        assert!(missing(&e));
        assert!(e.to_string().contains(&root.join("proc/sys/vm/swappiness").display().to_string()), "{e}");
        // Writing never creates: a missing kernel file stays missing.
        assert!(fs.write(Path::new("/proc/sys/nope"), "1").is_err());
        assert!(!root.join("proc/sys/nope").exists());
    }

    #[test]
    fn symlinks_resolve_to_system_paths_and_devices_come_from_ancestors() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sys/devices/block/sda/sda1")).unwrap();
        std::fs::create_dir_all(root.join("sys/dev/block")).unwrap();
        std::os::unix::fs::symlink("../../devices/block/sda/sda1", root.join("sys/dev/block/8:1")).unwrap();
        let fs = RootFs::new(root).unwrap();
        assert_eq!(fs.resolve(Path::new("/sys/dev/block/8:1")).unwrap(), Path::new("/sys/devices/block/sda/sda1"));
        assert_eq!(fs.device_of(Path::new("/not/yet/created")).unwrap(), fs.device_of(Path::new("/")).unwrap());
    }
}
