//! A fake machine for the tuners' tests: a temp dir standing in for `/`, filled with the
//! `/proc` and `/sys` files a test needs.

use std::io;
use std::path::{Path, PathBuf};

use super::fs::{Fs, RootFs};

pub(super) struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    pub(super) fn new() -> Tree {
        Tree { dir: tempfile::tempdir().unwrap() }
    }

    pub(super) fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub(super) fn fs(&self) -> RootFs {
        RootFs::new(self.dir.path()).unwrap()
    }

    /// Creates (or overwrites) `rel` with `text` plus a newline, as the kernel shows values.
    pub(super) fn file(&self, rel: &str, text: &str) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }

    pub(super) fn dir(&self, rel: &str) {
        std::fs::create_dir_all(self.dir.path().join(rel)).unwrap();
    }

    /// `rel` as a symlink to `target` (relative, so it resolves inside the tree).
    pub(super) fn link(&self, target: &str, rel: &str) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }

    pub(super) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).unwrap().trim_end().to_string()
    }

    /// Where `rel` is on this machine, as error messages name it.
    pub(super) fn shown(&self, rel: &str) -> String {
        self.root().join(rel).display().to_string()
    }

    /// Every file under the tree with its content, to prove a mode changed nothing.
    pub(super) fn snapshot(&self) -> Vec<(PathBuf, String)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                if meta.is_dir() {
                    walk(&p, out);
                } else if meta.is_file() {
                    out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out.sort();
        out
    }
}

/// A [`Fs`] over a [`Tree`] whose writes to chosen files fail (as a read-only or
/// kernel-refused file would) or vanish (as a sysfs file that accepts and ignores a value).
pub(super) struct Faulty {
    pub inner: RootFs,
    pub refuse: Vec<PathBuf>,
    pub ignore: Vec<PathBuf>,
}

impl Fs for Faulty {
    fn read(&self, path: &Path) -> io::Result<String> {
        self.inner.read(path)
    }
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        if self.refuse.iter().any(|p| p == path) {
            let shown = self.inner.shown(path);
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: Permission denied", shown.display()),
            ));
        }
        if self.ignore.iter().any(|p| p == path) {
            return Ok(());
        }
        self.inner.write(path, value)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn resolve(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.resolve(path)
    }
    fn device_of(&self, path: &Path) -> io::Result<(u64, u64)> {
        self.inner.device_of(path)
    }
    fn shown(&self, path: &Path) -> PathBuf {
        self.inner.shown(path)
    }
}
