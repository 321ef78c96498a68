//! A guard against tests that would hang on the defect they check: the test runs on a
//! thread of its own and fails if it has not finished after a minute (not a timing
//! assertion: a passing test finishes in well under a second).

use std::sync::mpsc;
use std::time::Duration;

/// Runs `test` on a thread and fails if it has not finished after a minute.
pub fn watchdog(name: &str, test: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        test();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{name}: still waiting after a minute"),
    }
}
