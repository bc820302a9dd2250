//! The Linux side of the safety checks (see safety.rs): libblkid's probe
//! (crate::blkid) and what the kernel holds a block device or file for
//! (/sys/dev/block, /proc/self/mountinfo, /proc/swaps, holders/, loop
//! devices' backing files). Reads only; the wording of a refusal is safety.rs's.

use crate::blkid::{Probe, Step, SUBLKS_BADCSUM, SUBLKS_TYPE, SUBLKS_USAGE, SUBLKS_VERSION};
use crate::safety::Signature;
use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Every signature on the device or file open as `file`, as `wipefs` would
/// list them: all superblock probers in turn (also ones with a bad checksum,
/// which still mark data someone may want back), then the partition tables.
pub fn probe_signatures(file: &File) -> io::Result<Vec<Signature>> {
    let mut probe = Probe::new(file)?;
    probe.superblocks(SUBLKS_TYPE | SUBLKS_USAGE | SUBLKS_VERSION | SUBLKS_BADCSUM)?;
    probe.partitions()?;
    let mut found: Vec<Signature> = Vec::new();
    // Each call returns the next match of the current chain; bounded in case a
    // library bug never reports Done.
    for _ in 0..256 {
        if probe.step()? == Step::Done {
            break;
        }
        let value = |name: &CStr| probe.value(name).filter(|v| !v.is_empty());
        let sig = if let Some(kind) = value(c"TYPE") {
            Signature { kind, usage: value(c"USAGE"), version: value(c"VERSION") }
        } else if let Some(kind) = value(c"PTTYPE") {
            Signature { kind, usage: Some("partition table".into()), version: None }
        } else {
            continue;
        };
        if !found.contains(&sig) {
            found.push(sig);
        }
    }
    Ok(found)
}

/// Why the kernel holds the block device `rdev` (an exclusive open failed
/// with EBUSY): where it or one of its partitions is mounted, which md/dm
/// device holds it, or that it is swap; a general reason otherwise.
pub fn in_use_reason(rdev: u64) -> String {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let mut devs = vec![(major, minor)];
    // A whole disk is busy when one of its partitions is mounted.
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if let Ok(entries) = std::fs::read_dir(&sys) {
        for e in entries.flatten() {
            if e.path().join("partition").exists() {
                if let Some(d) = std::fs::read_to_string(e.path().join("dev")).ok().and_then(|s| parse_dev(s.trim())) {
                    devs.push(d);
                }
            }
        }
    }
    let mut reasons = Vec::new();
    if let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") {
        for line in mountinfo.lines() {
            // id parent major:minor root mount-point ...
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() > 4 && parse_dev(fields[2]).is_some_and(|d| devs.contains(&d)) {
                reasons.push(format!("mounted on {}", unescape_mount(fields[4])));
            }
        }
    }
    for (ma, mi) in &devs {
        if let Ok(holders) = std::fs::read_dir(format!("/sys/dev/block/{ma}:{mi}/holders")) {
            for h in holders.flatten() {
                reasons.push(format!("held by {}", h.file_name().to_string_lossy()));
            }
        }
    }
    if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
        for line in swaps.lines().skip(1) {
            let dev = line.split_whitespace().next().unwrap_or_default();
            if std::fs::metadata(dev).is_ok_and(|m| m.rdev() == rdev) {
                reasons.push("active swap".into());
            }
        }
    }
    if reasons.is_empty() {
        return "opened exclusively by the kernel or another program (an md/dm/LVM member, swap, a mount, or a tool \
                like mkfs)"
            .into();
    }
    reasons.join(", ")
}

fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// The loop devices whose backing file is the file open as `file` (the
/// kernel writes through them; writing the file under them corrupts what
/// they hold).
pub fn loop_devices_backed_by(file: &File) -> Vec<String> {
    let Ok(meta) = file.metadata() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    let mut found = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(backing) = std::fs::read_to_string(e.path().join("loop/backing_file")) else { continue };
        if std::fs::metadata(Path::new(backing.trim_end_matches('\n')))
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
        {
            found.push(format!("/dev/{name}"));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::safety::describe;
    use std::io::Write;

    fn file_with(bytes: &[(usize, &[u8])], len: usize) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        let mut data = vec![0u8; len];
        for (offset, magic) in bytes {
            data[*offset..offset + magic.len()].copy_from_slice(magic);
        }
        std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
        let f = File::open(&path).unwrap();
        (dir, f)
    }

    #[test]
    fn blank_and_random_data_carry_no_signature() {
        let (_d, f) = file_with(&[], 4 << 20);
        assert_eq!(probe_signatures(&f).unwrap(), vec![]);
        let mut r = vec![0u8; 4 << 20];
        crate::data::FastRng::new(5).fill(&mut r);
        let (_d, f) = file_with(&[(0, &r)], 4 << 20);
        assert_eq!(probe_signatures(&f).unwrap(), vec![]);
    }

    #[test]
    fn libblkid_names_what_it_finds() {
        // An xfs magic alone is not a valid xfs superblock to libblkid; a
        // LUKS1 header's magic and version are enough for its prober.
        let (_d, f) = file_with(&[(0, b"LUKS\xba\xbe\x00\x01")], 4 << 20);
        let found = probe_signatures(&f).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, "crypto_LUKS");
        assert_eq!(found[0].usage.as_deref(), Some("crypto"));
        assert!(describe(&found).starts_with("a crypto_LUKS (crypto"), "{}", describe(&found));
    }

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape_mount("/mnt/my\\040disk"), "/mnt/my disk");
        assert_eq!(parse_dev("7:3"), Some((7, 3)));
        assert_eq!(parse_dev("x"), None);
    }
}
