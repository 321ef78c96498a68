//! A minimal executor for the `_blocking` calls: polls one future on the calling thread,
//! parking between wake-ups. kring's futures wait only on channels fed by the workers
//! (timers live on the workers), so no reactor is needed here.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread. Do not call it from inside an async
/// runtime: it blocks the thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    thread_local! {
        // One waker per thread, made once: blocking calls in a loop allocate nothing.
        static WAKER: Waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    }
    let mut future = pin!(future);
    let waker = WAKER.with(Waker::clone);
    let mut cx = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_a_value_sent_from_another_thread() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send(42).unwrap();
        });
        assert_eq!(block_on(rx).unwrap(), 42);
        t.join().unwrap();
    }
}
