//! The block I/O limit a cgroup puts on this process for the device under a
//! path: cgroup v1 `blkio.throttle.{read,write}_{bps,iops}_device` or v2
//! `io.max`, the tightest of the process's group and its ancestors. A disk
//! figure at such a limit is the limit's, a ceiling the verdict can prove
//! (a container's `--device-read-bps`, systemd's `IOReadBandwidthMax`).
//!
//! Reads the cgroup filesystem only; never sets a limit.

use super::cgroup::{Cgroup, Controller};
use headroom_result::IoLimit;
use std::path::Path;

/// The limit on the device holding `path` (its own device, or for a
/// partition the whole disk's), None when no group limits it.
pub fn io_limit(path: &Path) -> Option<IoLimit> {
    let devices = device_numbers(path)?;
    let group = Cgroup::of(Path::new("/proc/self"), Controller::Io)?;
    let mut found: Option<IoLimit> = None;
    for (cgroup, dir) in group.up_to_root() {
        for device in &devices {
            let limits = match group.version {
                1 => v1_limits(&dir, device),
                _ => v2_limits(&std::fs::read_to_string(dir.join("io.max")).unwrap_or_default(), device),
            };
            if limits.iter().all(Option::is_none) {
                continue;
            }
            let here = IoLimit {
                version: group.version,
                cgroup: cgroup.clone(),
                device: device.clone(),
                read_bytes_per_sec: limits[0],
                write_bytes_per_sec: limits[1],
                read_iops: limits[2],
                write_iops: limits[3],
            };
            found = Some(match found {
                None => here,
                Some(inner) => inner.tightest(here),
            });
        }
    }
    found
}

/// "MAJ:MIN" of the path's device and, for a partition, of its whole disk.
fn device_numbers(path: &Path) -> Option<Vec<String>> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).ok()?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let own = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let mut numbers = vec![own.clone()];
    let sys = Path::new("/sys/dev/block").join(&own);
    if sys.join("partition").exists() {
        if let Some(disk) = std::fs::read_to_string(sys.join("../dev")).ok().map(|s| s.trim().to_string()) {
            numbers.push(disk);
        }
    }
    Some(numbers)
}

/// [read bps, write bps, read iops, write iops] of one v1 group for `device`.
fn v1_limits(dir: &Path, device: &str) -> [Option<u64>; 4] {
    ["read_bps_device", "write_bps_device", "read_iops_device", "write_iops_device"].map(|f| {
        let text = std::fs::read_to_string(dir.join(format!("blkio.throttle.{f}"))).unwrap_or_default();
        v1_value(&text, device)
    })
}

/// The value of `device`'s line ("8:0 41943040") in a v1 throttle file.
fn v1_value(text: &str, device: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (d, v) = l.split_once(' ')?;
        (d == device).then(|| v.trim().parse().ok()).flatten()
    })
}

/// [rbps, wbps, riops, wiops] of `device`'s line in a v2 io.max ("8:0 rbps=41943040 wbps=max ...").
fn v2_limits(text: &str, device: &str) -> [Option<u64>; 4] {
    let Some(line) = text.lines().find(|l| l.split_whitespace().next() == Some(device)) else { return [None; 4] };
    ["rbps", "wbps", "riops", "wiops"]
        .map(|key| line.split_whitespace().find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_files_parse() {
        assert_eq!(v1_value("7:3 41943040\n8:0 1000\n", "7:3"), Some(41943040));
        assert_eq!(v1_value("7:3 41943040\n", "7:4"), None);
        let io_max = "8:0 rbps=41943040 wbps=max riops=max wiops=300\n259:0 rbps=1\n";
        assert_eq!(v2_limits(io_max, "8:0"), [Some(41943040), None, None, Some(300)]);
        assert_eq!(v2_limits(io_max, "8:16"), [None; 4]);
    }

    #[test]
    fn an_unthrottled_path_has_no_limit_or_the_groups_own() {
        // The test's own group may be throttled by whoever runs it; what is
        // found must then name a device of this path.
        if let Some(limit) = io_limit(Path::new("/")) {
            assert!(device_numbers(Path::new("/")).unwrap().contains(&limit.device), "{limit:?}");
        }
        assert_eq!(io_limit(Path::new("/no/such/path")), None);
    }
}
