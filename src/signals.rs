//! Ctrl-C: the first one asks every running probe to stop (engines poll the
//! flag, clean up their files and return what they measured); a second one
//! exits at once with code 130.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static STOP: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<()> = OnceLock::new();

/// The process-wide stop flag, with the Ctrl-C/SIGTERM handler installed on first use.
pub fn stop_flag() -> &'static AtomicBool {
    INSTALLED.get_or_init(|| {
        let _ = ctrlc::set_handler(|| {
            if STOP.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!("\nheadroom: stopping (Ctrl-C again to quit at once)");
        });
    });
    &STOP
}
