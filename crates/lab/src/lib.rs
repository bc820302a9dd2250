//! The test lab: real disks and real networks for headroom's tests, built from
//! what a Linux machine offers (see ../shared/reference/LAB.md). Everything it
//! creates is removed on drop, also when a test fails.
//!
//! Used only by tests, benches and scripts; never by the headroom binary.

pub mod blockdev;
pub mod cpu;
pub mod netns;

/// Whether this process runs as root (namespaces, loop devices and cgroups need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Skips the calling test with a printed reason unless running as root.
/// Usage: `headroom_lab::require_root!();` at the top of a test.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            eprintln!("SKIPPED {}: needs root (namespaces, loop devices or cgroups)", module_path!());
            return;
        }
    };
}

/// Skips the calling test with a printed reason unless `program` is on PATH.
#[macro_export]
macro_rules! require_program {
    ($program:expr) => {
        if !$crate::has_program($program) {
            eprintln!("SKIPPED {}: `{}` is not installed (run scripts/install-deps.sh)", module_path!(), $program);
            return;
        }
    };
}

/// Whether `program` can be found on PATH.
pub fn has_program(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// Runs a command, returning its stdout, or an error with its stderr.
pub fn sh(program: &str, args: &[&str]) -> std::io::Result<String> {
    let out = std::process::Command::new(program).args(args).output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(std::io::Error::other(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Holds the machine for one test that measures speed or loads it: while the
/// guard lives, no other test holding one runs, in this process or another
/// (cargo runs a binary's tests on parallel threads, and two test binaries or
/// two checkouts can run at once). A flock on a file in the temp directory, so
/// a test that crashes releases it with its process.
pub struct MachineGuard {
    _file: std::fs::File,
    _in_process: std::sync::MutexGuard<'static, ()>,
}

thread_local! {
    /// Whether this thread holds the machine: taking it twice would wait forever.
    static HELD_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Drop for MachineGuard {
    fn drop(&mut self) {
        HELD_HERE.with(|held| held.set(false));
    }
}

/// Waits until no other test holds the machine, then holds it (see [`MachineGuard`]).
/// Use it in every test that asserts a speed and every test that loads the
/// disk, the network or the CPUs enough to disturb one.
pub fn hold_machine() -> MachineGuard {
    // flock is per open file description, so threads of one process each open
    // their own; the mutex keeps a poisoned or re-entrant case simple.
    static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    assert!(
        !HELD_HERE.with(|held| held.replace(true)),
        "hold_machine() called twice on one thread: the test already holds the machine"
    );
    let in_process = IN_PROCESS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let path = std::env::temp_dir().join("headroom-lab-machine.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open the lab lock {}: {e}", path.display()));
    file.lock().unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
    MachineGuard { _file: file, _in_process: in_process }
}
