//! The Linux implementation of headroom-disk's platform seam (see
//! `os/mod.rs`): the psync engine (pread/pwrite/fsync from threads), the
//! io_uring engine, and the safety checks' probe (libblkid) and kernel holders. Each moves bytes through the engine trait only; what to
//! queue and when is the runner's.

mod psync;
mod safety;
mod uring;

pub use psync::PsyncEngine;
pub use safety::{in_use_reason, loop_devices_backed_by, probe_signatures};
pub use uring::{force_async, UringEngine};

/// The asynchronous engine's name in the result document.
pub const ASYNC_ENGINE: &str = "io_uring";

/// fio's name for the same engine (the fio equivalent line).
pub const FIO_ASYNC_ENGINE: &str = "io_uring";

/// The open flag that makes a test unbuffered (`direct`), as the result records it.
pub const DIRECT_FLAG: headroom_result::DirectFlag = headroom_result::DirectFlag::ODirect;

/// An open file as the engines' system calls take it.
pub use std::os::fd::RawFd as RawFile;

/// The descriptor of `file`, as the engines take it.
pub fn raw_file(file: &std::fs::File) -> RawFile {
    std::os::fd::AsRawFd::as_raw_fd(file)
}

/// Every signature libblkid finds on a device of `size` bytes of which only
/// `parts` (offset, bytes) were read: they go into a sparse copy that lives
/// in memory only (memfd, the rest reading as zeros, gone when closed),
/// which libblkid probes as it would the device.
pub fn probe_copy(size: u64, parts: &[(u64, Vec<u8>)]) -> io::Result<Vec<crate::safety::Signature>> {
    let memfd = rustix::fs::memfd_create("headroom-export-head", rustix::fs::MemfdFlags::CLOEXEC)?;
    let file = std::fs::File::from(memfd);
    file.set_len(size)?;
    for (offset, bytes) in parts {
        std::os::unix::fs::FileExt::write_all_at(&file, bytes, *offset)?;
    }
    probe_signatures(&file)
}

/// Asks for `len` bytes at `ptr` (huge-page aligned, owned by the caller) to
/// be backed by transparent huge pages, so each engine buffer is one physical
/// segment, and discards what the range held: it reads back as zeros. The
/// discard matters when the allocator hands back memory an earlier test
/// already touched: pages faulted in before the advice stay small, and the
/// next 1M test would split again. THP's default mode ("madvise") grants only
/// regions that ask; where THP is off or no huge page is free the range stays
/// on ordinary pages, which is correct, only split more often.
pub fn prefer_huge_pages(ptr: *mut u8, len: usize) {
    // SAFETY: both calls only change how the kernel backs a range the caller owns
    // and has not handed out; MADV_DONTNEED makes anonymous memory read as zeros.
    unsafe {
        let _ = libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
        let _ = libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED);
    }
}

/// Whether this kernel lets this process set up an io_uring (it may lack it,
/// or refuse it: seccomp, the io_uring_disabled sysctl).
pub fn uring_available() -> io::Result<()> {
    io_uring::IoUring::new(2).map(|_| ())
}

use std::io;

#[cfg(test)]
mod tests {
    use crate::engine::BufferPool;

    /// The VmFlags of the mapping that holds `addr`, from /proc/self/smaps.
    fn vm_flags_at(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                        inside = (a..b).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.trim().to_string());
                }
            }
        }
        None
    }

    #[test]
    fn large_buffer_pools_ask_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("SKIPPED: this kernel has no transparent huge pages");
            return;
        }
        // 8 x 1 MiB, as a 1M QD8 test, twice (the second pool may reuse the
        // first one's memory), then 1 x 1 MiB (1M QD1). Each region carries
        // the advice ("hg"), whether or not the kernel had a huge page free.
        for (round, count) in [8, 8, 1].into_iter().enumerate() {
            let pool = BufferPool::new(count, 1 << 20, 4096);
            for i in 0..pool.len() {
                let flags = vm_flags_at(pool.ptr(i) as usize).expect("buffer mapping in smaps");
                assert!(flags.split(' ').any(|f| f == "hg"), "pool {round}, buffer {i}: VmFlags {flags}");
            }
        }
    }
}
