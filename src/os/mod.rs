//! The platform seam of the headroom binary: how a request to stop (Ctrl-C,
//! a service manager's stop, a closed terminal) reaches the process,
//! implemented once per platform beside this file (`linux.rs` today).
//! signals.rs calls only these names, so a port adds `windows.rs`
//! (SetConsoleCtrlHandler) with the same ones. See docs/platform.md.
//!
//! What a platform provides:
//! - `watch_stop_signals(on)`: from now on, every request to stop calls `on`
//!   on a thread of its own, never inside a worker's system call;
//! - `exit_code(signal)`: the code a shell reports for a process that
//!   request killed.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::{exit_code, watch_stop_signals};

/// A request from outside to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// A service manager or `kill` (SIGTERM).
    Terminate,
    /// The terminal went away (SIGHUP).
    HangUp,
}
