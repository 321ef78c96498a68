//! Choosing the I/O backend: io_uring wherever it works, epoll elsewhere. io_uring is
//! probed once at start (it is disabled in many containers: Docker's default seccomp
//! profile blocks `io_uring_setup`). Configuration or the `KRING_IO_BACKEND` environment
//! variable can force either.

use std::future::Future;
use std::sync::OnceLock;

use crate::io::IoError;
use crate::io::uring;

/// The environment variable that forces a backend when the configuration says `Auto`:
/// `io_uring` (or `uring`) or `epoll`.
pub const BACKEND_ENV: &str = "KRING_IO_BACKEND";

/// The backend a runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Completion-based I/O through io_uring (tokio-uring).
    IoUring,
    /// Readiness-based I/O through epoll (tokio).
    Epoll,
}

impl Backend {
    /// The backend's name as the environment variable spells it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::IoUring => "io_uring",
            Backend::Epoll => "epoll",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the configuration asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// io_uring if the probe passes, else epoll; `KRING_IO_BACKEND` may force either.
    #[default]
    Auto,
    /// io_uring, or an error if it does not work here.
    IoUring,
    /// epoll.
    Epoll,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(BackendChoice::Auto),
            "io_uring" | "uring" | "iouring" | "io-uring" => Ok(BackendChoice::IoUring),
            "epoll" => Ok(BackendChoice::Epoll),
            other => Err(format!(
                "unknown I/O backend {other:?} (expected auto, io_uring or epoll)"
            )),
        }
    }
}

/// Whether io_uring works here (probed once per process).
pub fn io_uring_available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(uring::probe).clone()
}

/// Resolves a choice to a backend: an explicit choice wins, then the environment
/// variable, then the probe.
pub fn select(choice: BackendChoice) -> Result<Backend, IoError> {
    let choice = match choice {
        BackendChoice::Auto => match std::env::var(BACKEND_ENV) {
            Ok(v) => v
                .parse()
                .map_err(|e| IoError::Runtime(format!("{BACKEND_ENV}: {e}")))?,
            Err(_) => BackendChoice::Auto,
        },
        explicit => explicit,
    };
    match choice {
        BackendChoice::Epoll => Ok(Backend::Epoll),
        BackendChoice::IoUring => io_uring_available()
            .map(|()| Backend::IoUring)
            .map_err(|e| IoError::Runtime(format!("io_uring was requested but {e}"))),
        BackendChoice::Auto => Ok(match io_uring_available() {
            Ok(()) => Backend::IoUring,
            Err(reason) => {
                tracing::info!(%reason, "io_uring unavailable, using epoll");
                Backend::Epoll
            }
        }),
    }
}

/// Runs `future` on a new single-threaded runtime of `backend` on this thread, with
/// `spawn_local` available.
pub(crate) fn block_on<F: Future>(backend: Backend, future: F) -> std::io::Result<F::Output> {
    match backend {
        Backend::IoUring => uring::block_on(future),
        Backend::Epoll => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let local = tokio::task::LocalSet::new();
            Ok(local.block_on(&rt, future))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse() {
        assert_eq!("io_uring".parse(), Ok(BackendChoice::IoUring));
        assert_eq!("EPOLL".parse(), Ok(BackendChoice::Epoll));
        assert_eq!("auto".parse(), Ok(BackendChoice::Auto));
        assert!("kqueue".parse::<BackendChoice>().is_err());
    }

    #[test]
    fn explicit_epoll_needs_no_probe() {
        assert_eq!(select(BackendChoice::Epoll).unwrap(), Backend::Epoll);
    }
}
