//! Last closes off the shard's thread. Closing the last handle on a removed file frees its
//! cached pages and its blocks there and then: the old segments of a cleaning of 3 GB took
//! 700 ms to let go of, all of it on the shard's thread, which served nothing meanwhile
//! (the `swap_us` of the cleaner's log line); dropping their index maps and files took
//! another 25 ms of it. Handles given to `close_in_background`, and whatever holds them,
//! are dropped on a thread of the calling thread's own instead, started on first use, so it
//! inherits the shard's CPU placement, and niced to 19 like the cleaner: it takes what the
//! shard leaves of its core.

use std::cell::RefCell;
use std::sync::mpsc;

/// What the closer drops.
type Handles = Box<dyn Send>;

thread_local! {
    /// This thread's closer; it ends when the thread does and this sender goes.
    static CLOSER: RefCell<Option<mpsc::Sender<Handles>>> = const { RefCell::new(None) };
}

/// Drops `files` (file handles, or what holds them: a segment with its index maps) on this
/// thread's closer thread. A handle someone else still holds (a fetch in flight) stays open
/// until they drop it too. Without a closer (it could not be started) they are dropped here.
pub fn close_in_background<T: Send + 'static>(files: Vec<T>) {
    if files.is_empty() {
        return;
    }
    let files: Handles = Box::new(files);
    CLOSER.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = start();
        }
        if let Some(tx) = slot.as_ref() {
            if let Err(mpsc::SendError(files)) = tx.send(files) {
                *slot = None;
                drop(files);
            }
        }
    });
}

fn start() -> Option<mpsc::Sender<Handles>> {
    let (tx, rx) = mpsc::channel::<Handles>();
    let spawned = crate::sys::spawn_niced_beside("closer", move || {
        while let Ok(files) = rx.recv() {
            drop(files);
        }
    });
    match spawned {
        Ok(()) => Some(tx),
        Err(e) => {
            tracing::error!("cannot start the file closer thread, closing files on the shard's: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::sync::Arc;

    use super::*;
    use std::time::{Duration, Instant};

    fn threads_named(name: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
            .count()
    }

    #[test]
    fn handles_given_over_are_dropped_by_a_closer_of_the_callers_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        std::thread::Builder::new()
            .name("cl-test".into())
            .spawn(move || {
                let file = Arc::new(File::create(path.join("f")).unwrap());
                let weak = Arc::downgrade(&file);
                close_in_background(vec![file]);
                let deadline = Instant::now() + Duration::from_secs(10);
                while weak.upgrade().is_some() {
                    assert!(Instant::now() < deadline, "the closer never dropped the handle");
                    std::thread::sleep(Duration::from_millis(5));
                }
                assert_eq!(threads_named("cl-test-closer"), 1, "the closer is a thread of this one's");
                close_in_background(vec![Arc::new(File::create(path.join("g")).unwrap())]);
                assert_eq!(threads_named("cl-test-closer"), 1, "one closer per thread");
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
