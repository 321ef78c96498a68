//! Choosing the I/O backend: io_uring wherever it works, epoll elsewhere. io_uring is
//! probed once at start (it is disabled in many containers: Docker's default seccomp
//! profile blocks `io_uring_setup`). Configuration or the `KRING_IO_BACKEND` environment
//! variable can force either.
//!
//! The io_uring backend exists only on Linux with the `io-uring` cargo feature (on by
//! default): `cfg(all(target_os = "linux", feature = "io-uring"))`. Elsewhere epoll
//! (tokio's readiness backend: epoll, kqueue or IOCP) is the only backend, `auto` picks
//! it, and asking for io_uring is refused with the reason (`NO_IO_URING`), never
//! silently served by epoll.

use std::future::Future;
#[cfg(all(target_os = "linux", feature = "io-uring"))]
use std::sync::OnceLock;

use crate::io::IoError;
#[cfg(all(target_os = "linux", feature = "io-uring"))]
use crate::io::uring;

/// Why this build has no io_uring backend.
#[cfg(all(target_os = "linux", not(feature = "io-uring")))]
pub const NO_IO_URING: &str =
    "this build of kring has no io_uring backend: it was built without the io-uring cargo feature";
/// Why this build has no io_uring backend.
#[cfg(not(target_os = "linux"))]
pub const NO_IO_URING: &str =
    "this build of kring has no io_uring backend: io_uring exists on Linux only";

/// The environment variable that forces a backend when the configuration says `Auto`:
/// `io_uring` (or `uring`) or `epoll`.
pub const BACKEND_ENV: &str = "KRING_IO_BACKEND";

/// The backend a runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Completion-based I/O through io_uring (a ring per worker). Linux with the `io-uring`
    /// feature only.
    #[cfg(all(target_os = "linux", feature = "io-uring"))]
    IoUring,
    /// Readiness-based I/O through epoll (tokio).
    Epoll,
}

impl Backend {
    /// The backend's name as the environment variable spells it.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(all(target_os = "linux", feature = "io-uring"))]
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
    /// io_uring, or an error if it does not work here. Linux with the `io-uring`
    /// feature only.
    #[cfg(all(target_os = "linux", feature = "io-uring"))]
    IoUring,
    /// epoll.
    Epoll,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(BackendChoice::Auto),
            #[cfg(all(target_os = "linux", feature = "io-uring"))]
            "io_uring" | "uring" | "iouring" | "io-uring" => Ok(BackendChoice::IoUring),
            #[cfg(not(all(target_os = "linux", feature = "io-uring")))]
            "io_uring" | "uring" | "iouring" | "io-uring" => Err(NO_IO_URING.to_string()),
            "epoll" => Ok(BackendChoice::Epoll),
            other => Err(format!(
                "unknown I/O backend {other:?} (expected auto, io_uring or epoll)"
            )),
        }
    }
}

/// Whether io_uring works here (probed once per process).
#[cfg(all(target_os = "linux", feature = "io-uring"))]
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
        #[cfg(all(target_os = "linux", feature = "io-uring"))]
        BackendChoice::IoUring => io_uring_available()
            .map(|()| Backend::IoUring)
            .map_err(|e| IoError::Runtime(format!("io_uring was requested but {e}"))),
        BackendChoice::Auto => Ok(auto()),
    }
}

/// `auto`: io_uring if the probe passes, else epoll.
#[cfg(all(target_os = "linux", feature = "io-uring"))]
fn auto() -> Backend {
    match io_uring_available() {
        Ok(()) => Backend::IoUring,
        Err(reason) => {
            tracing::info!(%reason, "io_uring unavailable, using epoll");
            Backend::Epoll
        }
    }
}

/// `auto`: epoll, the only backend of this build.
#[cfg(not(all(target_os = "linux", feature = "io-uring")))]
fn auto() -> Backend {
    Backend::Epoll
}

/// Runs `future` on a new single-threaded runtime of `backend` on this thread, with
/// `spawn_local` available.
pub(crate) fn block_on<F: Future>(backend: Backend, future: F) -> std::io::Result<F::Output> {
    match backend {
        #[cfg(all(target_os = "linux", feature = "io-uring"))]
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
        #[cfg(all(target_os = "linux", feature = "io-uring"))]
        assert_eq!("io_uring".parse(), Ok(BackendChoice::IoUring));
        #[cfg(not(all(target_os = "linux", feature = "io-uring")))]
        assert_eq!(
            "io_uring".parse::<BackendChoice>(),
            Err(NO_IO_URING.to_string())
        );
        assert_eq!("EPOLL".parse(), Ok(BackendChoice::Epoll));
        assert_eq!("auto".parse(), Ok(BackendChoice::Auto));
        assert!("kqueue".parse::<BackendChoice>().is_err());
    }

    /// Without io_uring, `auto` is epoll (unless the environment asks for io_uring, which
    /// is refused with the reason).
    #[cfg(not(all(target_os = "linux", feature = "io-uring")))]
    #[test]
    fn auto_is_epoll_without_io_uring() {
        match std::env::var(BACKEND_ENV).ok().as_deref() {
            Some("io_uring") => {
                let err = select(BackendChoice::Auto).unwrap_err().to_string();
                assert!(err.contains(NO_IO_URING), "{err}");
            }
            _ => assert_eq!(select(BackendChoice::Auto).unwrap(), Backend::Epoll),
        }
    }

    #[test]
    fn explicit_epoll_needs_no_probe() {
        assert_eq!(select(BackendChoice::Epoll).unwrap(), Backend::Epoll);
    }
}
