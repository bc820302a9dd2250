//! Refusing to destroy data: recognises filesystem, volume-manager and
//! partition-table signatures by their magic bytes at the start of a device or
//! file, the way blkid does, so `--destructive` alone never wipes one.
//!
//! Hand-written rather than linking libblkid: headroom is one static binary,
//! and only "is anything here?" matters, not the full probe.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes read from the start of a target: enough for the first ZFS label's
/// uberblock ring (128-256 KiB) and btrfs's primary superblock (64 KiB).
pub const SCAN_BYTES: usize = 264 * 1024;

/// Reads the start of `path` and names the first signature found.
pub fn scan_path(path: &Path) -> io::Result<Option<String>> {
    let f = File::open(path)?;
    let mut buf = vec![0u8; SCAN_BYTES];
    let mut filled = 0;
    while filled < buf.len() {
        let n = f.read_at(&mut buf[filled..], filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    buf.truncate(filled);
    Ok(detect_signature(&buf).map(str::to_string))
}

fn at(buf: &[u8], offset: usize, magic: &[u8]) -> bool {
    buf.get(offset..offset + magic.len()) == Some(magic)
}

/// Names the filesystem or partition table whose magic bytes `start` (the
/// first bytes of a device) carries, if any.
pub fn detect_signature(start: &[u8]) -> Option<&'static str> {
    // GPT header at LBA 1 for 512- and 4096-byte sectors.
    if at(start, 512, b"EFI PART") || at(start, 4096, b"EFI PART") {
        return Some("a GPT partition table");
    }
    // LVM2 physical volume: label in one of the first four sectors.
    for sector in 0..4 {
        let o = sector * 512;
        if at(start, o, b"LABELONE") && at(start, o + 24, b"LVM2 001") {
            return Some("an LVM2 physical volume");
        }
    }
    if at(start, 0, b"XFSB") {
        return Some("an xfs filesystem");
    }
    // ext2/3/4: superblock at 1024, s_magic 0xEF53 (little endian) at +56.
    if at(start, 1024 + 56, &[0x53, 0xEF]) {
        return Some("an ext2/3/4 filesystem");
    }
    if at(start, 0x10040, b"_BHRfS_M") {
        return Some("a btrfs filesystem");
    }
    // ZFS: uberblocks (magic 0x00bab10c) in the ring at 128 KiB of label 0.
    for slot in 0..128 {
        let o = 128 * 1024 + slot * 1024;
        if at(start, o, &0x00ba_b10c_u64.to_le_bytes()) || at(start, o, &0x00ba_b10c_u64.to_be_bytes()) {
            return Some("a ZFS pool member");
        }
    }
    if at(start, 0x8001, b"CD001") {
        return Some("an ISO 9660 filesystem");
    }
    for page in [4096usize, 8192, 16384, 65536] {
        if at(start, page - 10, b"SWAPSPACE2") {
            return Some("a swap area");
        }
    }
    if at(start, 3, b"NTFS    ") {
        return Some("an NTFS filesystem");
    }
    // MBR (also FAT/exFAT boot sectors): 0x55AA at the end of sector 0.
    if at(start, 510, &[0x55, 0xAA]) {
        return Some("an MBR partition table or boot sector");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank() -> Vec<u8> {
        vec![0u8; SCAN_BYTES]
    }

    #[test]
    fn each_signature_is_recognised_at_its_offset() {
        let cases: &[(usize, &[u8], &str)] = &[
            (512, b"EFI PART", "GPT"),
            (4096, b"EFI PART", "GPT"),
            (0, b"XFSB", "xfs"),
            (1080, &[0x53, 0xEF], "ext2/3/4"),
            (0x10040, b"_BHRfS_M", "btrfs"),
            (510, &[0x55, 0xAA], "MBR"),
            (4086, b"SWAPSPACE2", "swap"),
        ];
        for (offset, magic, name) in cases {
            let mut b = blank();
            b[*offset..offset + magic.len()].copy_from_slice(magic);
            let found = detect_signature(&b).unwrap_or_else(|| panic!("{name} not found"));
            assert!(found.contains(name), "{found} vs {name}");
        }
        let mut lvm = blank();
        lvm[512..520].copy_from_slice(b"LABELONE");
        lvm[536..544].copy_from_slice(b"LVM2 001");
        assert_eq!(detect_signature(&lvm), Some("an LVM2 physical volume"));
        let mut zfs = blank();
        zfs[128 * 1024 + 5 * 1024..][..8].copy_from_slice(&0x00ba_b10c_u64.to_le_bytes());
        assert_eq!(detect_signature(&zfs), Some("a ZFS pool member"));
    }

    #[test]
    fn zeros_and_random_data_carry_no_signature() {
        assert_eq!(detect_signature(&blank()), None);
        let mut r = blank();
        crate::data::FastRng::new(5).fill(&mut r);
        r[510] = 0; // a 1-in-65536 chance of a fake MBR mark; keep the test deterministic
        r[1080] = 0;
        assert_eq!(detect_signature(&r), None);
        assert_eq!(detect_signature(&[]), None);
    }
}
