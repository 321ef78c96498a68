//! Thread-per-core workers. Each worker is one OS thread running one single-threaded
//! runtime (a current-thread tokio runtime with a `LocalSet`, and with io_uring a ring
//! of the worker's own, `io::uring`) and owns a disjoint set of broker connections: a
//! connection's socket, buffers and in-flight table live on its worker alone, so
//! nothing on a worker's hot path takes a lock shared with other workers.
//!
//! Work reaches a worker through bounded queues: one per worker for starting tasks, and
//! one per connection for requests (see `io::connection`). [`Runtime`] is a cheap,
//! `Send + Sync` handle; when the last handle is dropped (or [`Runtime::shutdown`] is
//! called) every connection drains or fails its in-flight requests and the threads are
//! joined — on the dropping thread when it is a plain one, by a reaper thread when the
//! drop happens on a worker or in async code, so an executor is never blocked.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot, watch};

use crate::io::IoError;
use crate::io::backend::{self, Backend, BackendChoice};

/// Settings of the worker runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Worker threads; 0 means one per available core.
    pub workers: usize,
    /// Which I/O backend to use; `Auto` probes io_uring and falls back to epoll. The
    /// `KRING_IO_BACKEND` environment variable (`io_uring` or `epoll`) overrides `Auto`.
    pub backend: BackendChoice,
    /// Worker thread name prefix.
    pub thread_name: String,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            workers: 0,
            backend: BackendChoice::Auto,
            thread_name: "kring-io".into(),
        }
    }
}

type TaskFn = Box<dyn FnOnce(Backend) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

struct Worker {
    tx: Mutex<Option<mpsc::UnboundedSender<TaskFn>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    backend: Backend,
    workers: Vec<Worker>,
    shutdown_tx: watch::Sender<bool>,
    live_tasks: Arc<AtomicUsize>,
    next_worker: AtomicUsize,
}

thread_local! {
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// The worker threads that own broker connections. Cloning is cheap.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("backend", &self.inner.backend)
            .field("workers", &self.inner.workers.len())
            .finish()
    }
}

struct TaskGuard(Arc<AtomicUsize>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Runtime {
    /// Starts the workers.
    pub fn new(config: RuntimeConfig) -> Result<Runtime, IoError> {
        let backend = backend::select(config.backend)?;
        let count = if config.workers == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            config.workers
        };
        let (shutdown_tx, _) = watch::channel(false);
        let live_tasks = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::with_capacity(count);
        for index in 0..count {
            let (tx, rx) = mpsc::unbounded_channel::<TaskFn>();
            let live = live_tasks.clone();
            let thread = std::thread::Builder::new()
                .name(format!("{}-{index}", config.thread_name))
                .spawn(move || worker_main(backend, rx, live))
                .map_err(|e| IoError::Runtime(format!("spawning worker {index}: {e}")))?;
            workers.push(Worker {
                tx: Mutex::new(Some(tx)),
                thread: Mutex::new(Some(thread)),
            });
        }
        tracing::debug!(?backend, workers = count, "I/O runtime started");
        Ok(Runtime {
            inner: Arc::new(Inner {
                backend,
                workers,
                shutdown_tx,
                live_tasks,
                next_worker: AtomicUsize::new(0),
            }),
        })
    }

    /// The I/O backend in use.
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// The number of worker threads.
    pub fn workers(&self) -> usize {
        self.inner.workers.len()
    }

    /// Tasks (connections and the like) currently alive on the workers.
    pub fn live_tasks(&self) -> usize {
        self.inner.live_tasks.load(Ordering::Acquire)
    }

    /// The worker for a broker: brokers spread evenly by id; unknown ids round-robin.
    pub(crate) fn worker_for(&self, broker_id: i32) -> usize {
        let n = self.inner.workers.len();
        if broker_id >= 0 {
            broker_id as usize % n
        } else {
            self.inner.next_worker.fetch_add(1, Ordering::Relaxed) % n
        }
    }

    /// A receiver that turns true when the runtime shuts down.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.inner.shutdown_tx.subscribe()
    }

    /// Starts a task on worker `index`. The closure runs on the worker and gets the
    /// backend, so generic I/O code is instantiated for the right transport there.
    pub(crate) fn spawn_on<F, Fut>(&self, index: usize, make: F) -> Result<(), IoError>
    where
        F: FnOnce(Backend) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        if *self.inner.shutdown_tx.borrow() {
            return Err(IoError::ShuttingDown);
        }
        let worker = &self.inner.workers[index % self.inner.workers.len()];
        let tx = worker
            .tx
            .lock()
            .map_err(|_| IoError::ShuttingDown)?
            .clone()
            .ok_or(IoError::ShuttingDown)?;
        let task: TaskFn = Box::new(move |b| Box::pin(make(b)));
        // Unbounded: callers are async code (a lookup, a sleep, a commit) that must not
        // block their thread, and each queued task stands for an operation its caller
        // waits on, so the queue is as long as the work in progress, no longer.
        tx.send(task).map_err(|_| IoError::ShuttingDown)
    }

    /// Waits `duration` on a worker's timer, so callers on any executor (or none) can
    /// wait. The worker's timer goes as soon as the returned future is dropped, or the
    /// runtime shuts down (`Err` then): a waiter that gave up leaves nothing behind
    /// that a shutdown would have to wait out.
    pub(crate) async fn sleep(&self, duration: std::time::Duration) -> Result<(), IoError> {
        let (tx, rx) = oneshot::channel();
        let shutdown = self.shutdown_signal();
        self.spawn_on(self.worker_for(-1), move |_| {
            sleep_for_waiter(duration, tx, shutdown)
        })?;
        rx.await.map_err(|_| IoError::ShuttingDown)
    }

    /// Shuts down: connections stop taking requests, drain what is in flight (up to their
    /// drain timeout) and close; then the worker threads are joined. Idempotent. Called
    /// from a worker thread itself, it signals but cannot join that thread.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

impl Inner {
    /// Tells every worker to stop: connections drain, tasks end, threads exit.
    fn signal(&self) {
        self.shutdown_tx.send_replace(true);
        for w in &self.workers {
            if let Ok(mut tx) = w.tx.lock() {
                tx.take();
            }
        }
    }

    /// The worker threads not joined yet (taken: each is joined once).
    fn take_threads(&self) -> Vec<JoinHandle<()>> {
        self.workers
            .iter()
            .filter_map(|w| w.thread.lock().ok().and_then(|mut t| t.take()))
            .collect()
    }

    /// Signals and joins every worker (but the calling thread, if it is one).
    fn shutdown(&self) {
        self.signal();
        join_all(self.take_threads());
    }

    /// Signals, and leaves the joining to a reaper thread: for a drop on a worker or on
    /// an async executor's thread, which must not block while connections drain.
    fn shutdown_detached(&self) {
        self.signal();
        let threads = self.take_threads();
        if threads.is_empty() {
            return;
        }
        let reaper = std::thread::Builder::new()
            .name("kring-reaper".into())
            .spawn(move || join_all(threads));
        if let Err(e) = reaper {
            // The workers still stop on their own; they are just not joined.
            tracing::warn!(error = %e, "no thread to join the I/O workers");
        }
    }
}

/// Joins `threads`, skipping the calling thread (a worker dropping the last handle).
fn join_all(threads: Vec<JoinHandle<()>>) {
    let me = std::thread::current().id();
    for handle in threads {
        if handle.thread().id() != me {
            let _ = handle.join();
        }
    }
}

impl Drop for Inner {
    /// The last handle went away. On a plain thread the workers are joined here; on a
    /// worker, or inside an async runtime (where blocking would stall the executor for
    /// as long as connections take to drain), they are joined by a reaper thread.
    fn drop(&mut self) {
        let in_async = ON_WORKER.with(Cell::get) || tokio::runtime::Handle::try_current().is_ok();
        if in_async {
            self.shutdown_detached();
        } else {
            self.shutdown();
        }
    }
}

/// The worker's half of [`Runtime::sleep`]: answers `waiter` after `duration`, or ends
/// without answering once the waiter is gone or the runtime shuts down.
async fn sleep_for_waiter(
    duration: std::time::Duration,
    mut waiter: oneshot::Sender<()>,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::select! {
        () = tokio::time::sleep(duration) => {
            let _ = waiter.send(());
        }
        () = waiter.closed() => {}
        _ = shutdown.changed() => {}
    }
}

/// How late a worker's timer may fire after the time it was set for: tokio's timers
/// count whole milliseconds, rounding a deadline up to the next, and never fire early.
pub(crate) const TIMER_RESOLUTION: std::time::Duration = std::time::Duration::from_millis(1);

/// Sleeps until `deadline` (a `std` instant, as the engines speak), or forever when
/// there is none: the one timer the drivers on a worker arm from an engine's
/// `poll_timeout`.
pub(crate) async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

/// A driver's timer for deadlines that are usually met long before they pass (a
/// connection's request timeouts), armed as seldom as it can be.
///
/// A timer armed earlier than every other timer of the worker (or when it has none)
/// makes tokio wake the worker's driver (a write to its eventfd, and an `epoll_wait`
/// that returns at once), even from the worker itself. A connection that armed a fresh
/// timer for each request's timeout, and dropped it with the answer, paid that on every
/// request. This timer stays armed at the earliest deadline it was aimed at until that
/// passes: a later deadline leaves it as it is, and no deadline does not disarm it. It
/// may so fire before the deadline the driver needs; the driver then finds nothing due
/// (an engine's `handle_timeout` looks at the time it is given) and aims it again.
pub(crate) struct LazyDeadline {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    armed: Option<std::time::Instant>,
}

impl LazyDeadline {
    /// A timer not armed.
    pub(crate) fn new() -> Self {
        LazyDeadline {
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            armed: None,
        }
    }

    /// Makes sure the timer fires no later than `deadline`.
    pub(crate) fn aim(&mut self, deadline: Option<std::time::Instant>) {
        match (deadline, self.armed) {
            (Some(d), Some(armed)) if armed <= d => {}
            (Some(d), _) => {
                self.sleep.as_mut().reset(tokio::time::Instant::from_std(d));
                self.armed = Some(d);
            }
            (None, _) => {}
        }
    }

    /// Waits until the armed time (for ever when not armed), then disarms.
    pub(crate) async fn fired(&mut self) {
        if self.armed.is_none() {
            return std::future::pending().await;
        }
        self.sleep.as_mut().await;
        self.armed = None;
    }
}

fn worker_main(backend: Backend, mut rx: mpsc::UnboundedReceiver<TaskFn>, live: Arc<AtomicUsize>) {
    ON_WORKER.with(|w| w.set(true));
    let main = async move {
        let mut tasks = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                task = rx.recv() => match task {
                    Some(make) => {
                        live.fetch_add(1, Ordering::AcqRel);
                        let guard = TaskGuard(live.clone());
                        tasks.spawn_local(async move {
                            let _guard = guard;
                            make(backend).await;
                        });
                    }
                    None => break,
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        // Shutting down: every task watches the shutdown signal and finishes.
        while tasks.join_next().await.is_some() {}
    };
    if let Err(e) = backend::block_on(backend, main) {
        tracing::error!(error = %e, "I/O worker could not start its runtime");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{LazyDeadline, Runtime, RuntimeConfig};
    use crate::io::IoError;

    fn run(test: impl std::future::Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(test);
    }

    /// Whether the timer fires within `guard` (far longer than the deadlines here).
    async fn fires_within(timer: &mut LazyDeadline, guard: Duration) -> bool {
        tokio::time::timeout(guard, timer.fired()).await.is_ok()
    }

    #[test]
    fn a_later_deadline_or_none_leaves_the_timer_at_the_earlier_one() {
        run(async {
            let mut timer = LazyDeadline::new();
            timer.aim(Some(Instant::now() + Duration::from_millis(10)));
            timer.aim(Some(Instant::now() + Duration::from_secs(3600)));
            timer.aim(None);
            assert!(
                fires_within(&mut timer, Duration::from_secs(30)).await,
                "fires at the earliest deadline it was aimed at"
            );
            assert!(
                !fires_within(&mut timer, Duration::from_millis(50)).await,
                "disarmed once fired"
            );
        });
    }

    #[test]
    fn an_earlier_deadline_moves_the_timer() {
        run(async {
            let mut timer = LazyDeadline::new();
            timer.aim(Some(Instant::now() + Duration::from_secs(3600)));
            timer.aim(Some(Instant::now() + Duration::from_millis(10)));
            assert!(fires_within(&mut timer, Duration::from_secs(30)).await);
            timer.aim(Some(Instant::now() + Duration::from_millis(10)));
            assert!(
                fires_within(&mut timer, Duration::from_secs(30)).await,
                "armed again after firing"
            );
        });
    }

    /// An hour: far past any test's patience, so a timer left running shows.
    const HOUR: Duration = Duration::from_secs(3600);

    fn one_worker() -> Runtime {
        Runtime::new(RuntimeConfig {
            workers: 1,
            ..RuntimeConfig::default()
        })
        .unwrap()
    }

    /// Waits (up to a minute) until the runtime has `n` live tasks; whether it got there.
    async fn live_tasks_reach(rt: &Runtime, n: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        while rt.live_tasks() != n {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    #[test]
    fn a_sleep_given_up_leaves_no_timer_on_the_worker() {
        // Not dropped when the test fails: the drop would join a worker busy for an hour.
        let rt = std::mem::ManuallyDrop::new(one_worker());
        run(async {
            // Boxed, so that dropping it drops the future itself.
            let mut sleep = Box::pin(rt.sleep(HOUR));
            tokio::select! {
                _ = &mut sleep => panic!("an hour's sleep ended"),
                reached = live_tasks_reach(&rt, 1) => assert!(reached, "the worker's timer never started"),
            }
            drop(sleep);
            assert!(
                live_tasks_reach(&rt, 0).await,
                "the worker still runs the timer of a sleep given up: {} live tasks",
                rt.live_tasks()
            );
        });
        drop(std::mem::ManuallyDrop::into_inner(rt));
    }

    #[test]
    fn a_shutdown_ends_a_pending_sleep_instead_of_waiting_it_out() {
        let rt = one_worker();
        run(async {
            let sleep = rt.sleep(HOUR);
            tokio::pin!(sleep);
            tokio::select! {
                _ = &mut sleep => panic!("an hour's sleep ended"),
                reached = live_tasks_reach(&rt, 1) => assert!(reached, "the worker's timer never started"),
            }
            let (joined_tx, joined_rx) = std::sync::mpsc::channel();
            let handle = rt.clone();
            std::thread::spawn(move || {
                handle.shutdown();
                let _ = joined_tx.send(());
            });
            let answered = tokio::time::timeout(Duration::from_secs(60), &mut sleep).await;
            assert!(
                matches!(answered, Ok(Err(IoError::ShuttingDown))),
                "a shutdown answers the sleeper at once: {answered:?}"
            );
            assert!(
                joined_rx.recv_timeout(Duration::from_secs(60)).is_ok(),
                "the shutdown still waits for the worker"
            );
        });
    }
}
