//! The platform seam of the headroom binary: how a request to stop (Ctrl-C,
//! a service manager's stop, a closed terminal) reaches the process, and
//! the few file and terminal attributes the commands check, implemented
//! once per platform beside this file (`linux.rs`, `windows.rs`). The rest
//! of the binary calls only these names. See docs/platform.md.
//!
//! What a platform provides:
//! - `watch_stop_signals(on)`: from now on, every request to stop calls `on`
//!   on a thread of its own, never inside a worker's system call;
//! - `exit_code(signal)`: the code a shell reports for a process that
//!   request killed;
//! - `is_writable(path)`: whether this process may write there;
//! - `is_executable(metadata)`: whether a file found on PATH is a program;
//! - `terminal_columns(stdout)`: the terminal's width.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::{exit_code, is_executable, is_writable, terminal_columns, watch_stop_signals};
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{exit_code, is_executable, is_writable, terminal_columns, watch_stop_signals};

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
