//! The test lab: real disks and real networks for headroom's tests, built from
//! what a Linux machine offers (see ../shared/reference/LAB.md). Everything it
//! creates is removed on drop, also when a test fails.
//!
//! Used only by tests, benches and scripts; never by the headroom binary.

pub mod blockdev;
pub mod netns;

/// Whether this process runs as root (namespaces, loop devices and cgroups need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
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
