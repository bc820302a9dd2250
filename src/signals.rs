//! Ctrl-C, SIGTERM and SIGHUP: the first one asks every running probe to
//! stop (engines poll the flag, clean up their files and return what they
//! measured); a second one hurries the cleanup rather than skipping it: it
//! removes the test files at once and exits. The exit code is 128 plus the
//! first signal's number, as shells report a process that signal killed:
//! 130 for Ctrl-C, 143 for SIGTERM (systemd, Kubernetes, `kill`), 129 for
//! SIGHUP (the terminal went away). Owns only the stop flag and which signal
//! set it; what is cleaned up is the engines' business.
//!
//! How the requests reach the process is the platform's (`crate::os`); this
//! file holds what is the same everywhere: the flag, the first request and
//! the two messages.

use crate::os::{self, StopSignal};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

/// Shared, not only static: protocol clients keep a clone in their
/// connections' threads (`TargetOptions::stop`).
static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);
/// The exit code of the first signal that arrived (NO_SIGNAL: none).
static FIRST: AtomicU8 = AtomicU8::new(NO_SIGNAL);
static INSTALLED: OnceLock<()> = OnceLock::new();

/// What FIRST holds before a signal came; also the code of a stop set
/// through the flag without one (128 plus signal number 0, as before).
const NO_SIGNAL: u8 = 128;

/// The process-wide stop flag, with the signal thread started on first use.
pub fn stop_flag() -> &'static AtomicBool {
    INSTALLED.get_or_init(|| os::watch_stop_signals(on_signal));
    &STOP
}

/// The same flag as [`stop_flag`], for what must own its copy.
pub fn shared_stop_flag() -> Arc<AtomicBool> {
    stop_flag();
    Arc::clone(&STOP)
}

fn on_signal(signal: StopSignal) {
    let _ = FIRST.compare_exchange(NO_SIGNAL, os::exit_code(signal), Ordering::SeqCst, Ordering::SeqCst);
    if STOP.swap(true, Ordering::SeqCst) {
        eprintln!("\nheadroom: removing the test files and quitting");
        headroom_disk::remove_test_files_now();
        std::process::exit(i32::from(FIRST.load(Ordering::SeqCst)));
    }
    let name = match signal {
        StopSignal::Terminate => "SIGTERM",
        StopSignal::HangUp => "SIGHUP",
        StopSignal::Interrupt => "Ctrl-C",
    };
    eprintln!("\nheadroom: {name}: stopping (Ctrl-C again to quit sooner)");
}

/// The exit code after a stop by signal (130, 143 or 129), or None when
/// none arrived.
pub fn interrupted_exit() -> Option<u8> {
    if !STOP.load(Ordering::SeqCst) {
        return None;
    }
    Some(FIRST.load(Ordering::SeqCst))
}
