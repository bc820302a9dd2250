//! Linux: RLIMIT_NOFILE, the soft limit raised up to the hard one.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

pub(crate) fn raise_open_file_limit(needed: u64) -> Result<(), u64> {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return Ok(()) };
    if soft >= needed {
        return Ok(());
    }
    if hard < needed || setrlimit(Resource::RLIMIT_NOFILE, needed, hard).is_err() {
        return Err(hard);
    }
    Ok(())
}
