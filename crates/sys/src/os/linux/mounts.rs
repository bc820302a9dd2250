//! Mounted filesystems from /proc/self/mounts, without the kernel's pseudo
//! filesystems (proc, sysfs, cgroup, ...), which hold no user data.

use crate::SysRoot;
use headroom_result::Filesystem;

const PSEUDO: &[&str] = &[
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devpts",
    "mqueue",
    "debugfs",
    "tracefs",
    "securityfs",
    "pstore",
    "bpf",
    "configfs",
    "fusectl",
    "hugetlbfs",
    "autofs",
    "binfmt_misc",
    "devtmpfs",
    "efivarfs",
    "rpc_pipefs",
    "nsfs",
    "selinuxfs",
    "ramfs",
];

/// Every mounted filesystem that can hold data, in mount order.
pub fn filesystems(root: &SysRoot) -> Vec<Filesystem> {
    let Ok(text) = std::fs::read_to_string(root.proc().join("self/mounts")) else { return Vec::new() };
    text.lines().filter_map(parse_line).filter(|f| !PSEUDO.contains(&f.fstype.as_str())).collect()
}

/// "/dev/vda1 / ext4 rw,relatime 0 0" -> a Filesystem.
fn parse_line(line: &str) -> Option<Filesystem> {
    let mut fields = line.split(' ');
    let device = unescape(fields.next()?);
    let mountpoint = unescape(fields.next()?);
    let fstype = fields.next()?.to_string();
    let options = fields.next().map(str::to_string);
    Some(Filesystem { mountpoint, fstype, device, options })
}

/// The kernel writes space, tab, newline and backslash in mount fields as
/// octal escapes (`\040`); turn them back.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let digit = |k: usize| u32::from(bytes[i + k] - b'0');
            out.push((digit(1) * 64 + digit(2) * 8 + digit(3)) as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_unescapes_a_mount_line() {
        let f = parse_line(r"//nas/share\040one /mnt/my\040share cifs rw,vers=3.1.1 0 0").unwrap();
        assert_eq!(f.device, "//nas/share one");
        assert_eq!(f.mountpoint, "/mnt/my share");
        assert_eq!(f.fstype, "cifs");
        assert_eq!(f.options.as_deref(), Some("rw,vers=3.1.1"));
    }
}
