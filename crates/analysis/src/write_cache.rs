//! Writes that outran reads: sequential writes 1.5x or more faster than the
//! same disk's sequential reads can only have been acknowledged by a
//! write-back cache (a hypervisor's host memory, a RAID controller's, the
//! drive's own): no disk streams writes that much faster than it reads
//! them back. One rule, read by every command's disk probes (a warning on
//! the write probe, [`annotate_writes_outran_reads`]) and by the verdict
//! (its explanation, through [`writes_outran_reads`]).
//!
//! What it must not do: judge random I/O (an SSD's 4K writes acknowledged
//! from its DRAM are its normal speed, not a wrong figure) or compare tests
//! of different files or ends.

use headroom_result::{Probe, ProbeSpec, Warning, WarningCode};
use headroom_units::format_bytes_per_sec;

/// How much faster than its reads a disk's sequential writes must run to be
/// called a cache's: SSDs and hard disks read at least as fast as they write.
pub const WRITES_OUTRAN_READS: f64 = 1.5;

/// The factor `writes` ran above `reads` when they outran them by
/// [`WRITES_OUTRAN_READS`] or more: a sequential read and a sequential write
/// of the same file, measured on the same end. None otherwise.
/// Reads held at a cgroup I/O limit they recorded (85% of it or more) are
/// the limit's speed, not the disk's, and are not compared; nor are tests
/// through a storage protocol (NFS, SMB, iSCSI, NBD), where the two
/// directions cross a network that may not carry both alike (the verdict
/// holds those against the server's own disk instead).
pub fn writes_outran_reads(reads: &Probe, writes: &Probe) -> Option<f64> {
    let (ProbeSpec::Disk(r), ProbeSpec::Disk(w)) = (&reads.spec, &writes.spec) else { return None };
    let on_a_disk = r.protocol.is_none() && w.protocol.is_none();
    let same_file = on_a_disk && r.path == w.path && reads.host == writes.host;
    let (read, written) = (reads.summary.bytes_per_sec, writes.summary.bytes_per_sec);
    let outran = read > 0.0 && written >= read * WRITES_OUTRAN_READS;
    (same_file && r.rw == "read" && w.rw == "write" && outran && !held_by_io_limit(reads)).then_some(written / read)
}

/// Whether a read probe ran at the cgroup I/O limit it recorded (bytes or
/// I/Os per second).
fn held_by_io_limit(reads: &Probe) -> bool {
    let Some(limit) = reads.io_limit() else { return false };
    let at = |measured: Option<f64>, limit: Option<u64>| {
        measured.zip(limit).is_some_and(|(m, l)| m >= l as f64 * crate::verdict::AT_CEILING)
    };
    at(Some(reads.summary.bytes_per_sec), limit.read_bytes_per_sec) || at(reads.summary.iops, limit.read_iops)
}

/// How to see what reaches `disk` past the cache, for writes made with
/// `sync` (none, fsync or dsync): flushed writes, or more data than the
/// cache holds; synchronous writes that still outran mean a cache that
/// acknowledges flushes.
pub fn past_the_write_cache(disk: &str, sync: &str) -> String {
    if sync == "none" {
        format!("what reaches {disk}: --sync fsync (each write flushed through the cache), or more data than the cache holds; `headroom flushcheck` tells whether the cache keeps acknowledged writes across a power loss")
    } else {
        format!("the writes were --sync {sync} and still outran the reads: the cache acknowledges flushes (battery-backed, or one that ignores them); `headroom flushcheck` tells which")
    }
}

/// Adds the `writes_outran_reads` warning to each sequential write probe
/// that ran [`WRITES_OUTRAN_READS`] times or more above the read probe of
/// the same file and shape (block size, queue depth, jobs).
pub fn annotate_writes_outran_reads(probes: &mut [Probe]) {
    for (i, warning) in writes_outran_reads_warnings(probes) {
        probes[i].warnings.push(warning);
    }
}

/// The `writes_outran_reads` warning of each write probe in `probes` that
/// earns one, with its index ([`annotate_writes_outran_reads`] puts them on
/// the probes; a soak, whose probes summarise hours, on its document).
pub fn writes_outran_reads_warnings(probes: &[Probe]) -> Vec<(usize, Warning)> {
    let mut found = Vec::new();
    for (i, writes) in probes.iter().enumerate() {
        // Every read of the shape is tried: a soak holds one per end, and
        // the first found may be the other end's file.
        let mut paired = probes.iter().filter(|r| same_shape(r, writes));
        let Some((reads, factor)) = paired.find_map(|r| Some((r, writes_outran_reads(r, writes)?))) else { continue };
        let ProbeSpec::Disk(w) = &writes.spec else { continue };
        let message = format!(
            "{} ran {factor:.1}x {} on the same file ({} against {}): no disk writes faster than it reads, so a write-back cache acknowledged these writes (a hypervisor's host memory, a RAID controller's, or the drive's own); {}",
            writes.name,
            reads.name,
            format_bytes_per_sec(writes.summary.bytes_per_sec),
            format_bytes_per_sec(reads.summary.bytes_per_sec),
            past_the_write_cache("the disk", &w.sync),
        );
        found.push((i, Warning::new(WarningCode::WritesOutranReads, message)));
    }
    found
}

/// Whether `reads` is a read test of the same shape as the write test `writes`.
fn same_shape(reads: &Probe, writes: &Probe) -> bool {
    match (&reads.spec, &writes.spec) {
        (ProbeSpec::Disk(r), ProbeSpec::Disk(w)) => {
            (r.block_size, r.queue_depth, r.jobs) == (w.block_size, w.queue_depth, w.jobs) && r.rw == "read"
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::details::IO_LIMIT;
    use headroom_result::IoLimit;

    fn disk_probe(id: &str, rw: &str, queue_depth: u32, path: &str, bytes_per_sec: f64) -> Probe {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": id, "kind": "disk",
            "spec": {"rw": rw, "block_size": 1048576, "queue_depth": queue_depth, "jobs": 1, "direct": true,
                     "sync": "none", "engine": "io_uring", "path": path},
            "summary": {"bytes_per_sec": bytes_per_sec, "duration_s": 2.0}
        }))
        .unwrap()
    }

    fn outran(probes: &[Probe]) -> Vec<&str> {
        probes
            .iter()
            .filter(|p| p.warnings.iter().any(|w| w.code == WarningCode::WritesOutranReads))
            .map(|p| p.id.as_str())
            .collect()
    }

    #[test]
    fn sequential_writes_that_outran_the_same_files_reads_are_a_caches() {
        let mut probes = vec![
            disk_probe("seq1m-q8t1-read", "read", 8, "/t/f", 2.273e9),
            disk_probe("seq1m-q8t1-write", "write", 8, "/t/f", 3.880e9),
            // QD1: reads 1.0 GB/s, writes 1.4 GB/s (1.4x): a disk's.
            disk_probe("seq1m-q1t1-read", "read", 1, "/t/f", 1.0e9),
            disk_probe("seq1m-q1t1-write", "write", 1, "/t/f", 1.4e9),
            // Random writes faster than random reads are not judged.
            disk_probe("rnd-read", "randread", 32, "/t/f", 0.2e9),
            disk_probe("rnd-write", "randwrite", 32, "/t/f", 0.9e9),
        ];
        annotate_writes_outran_reads(&mut probes);
        assert_eq!(outran(&probes), ["seq1m-q8t1-write"]);
        let w = &probes[1].warnings[0];
        assert!(
            w.message.starts_with(
                "seq1m-q8t1-write ran 1.7x seq1m-q8t1-read on the same file (3.880 GB/s against 2.273 GB/s)"
            ),
            "{}",
            w.message
        );
        assert!(w.message.ends_with("across a power loss"), "{}", w.message);
    }

    #[test]
    fn another_file_or_another_end_is_not_the_same_disk() {
        let mut probes = vec![disk_probe("r", "read", 8, "/a/f", 1e9), disk_probe("w", "write", 8, "/b/f", 3e9)];
        annotate_writes_outran_reads(&mut probes);
        assert!(outran(&probes).is_empty());
        let (reads, mut writes) = (disk_probe("r", "read", 8, "/a/f", 1e9), disk_probe("w", "write", 8, "/a/f", 3e9));
        assert_eq!(writes_outran_reads(&reads, &writes), Some(3.0));
        writes.host = Some("nas".into());
        assert_eq!(writes_outran_reads(&reads, &writes), None, "the server's file is another");
        writes.host = None;
        let over_smb: headroom_result::ProtocolInfo =
            serde_json::from_value(serde_json::json!({"name": "smb", "server": "nas"})).unwrap();
        let ProbeSpec::Disk(spec) = &mut writes.spec else { unreachable!() };
        spec.protocol = Some(over_smb);
        assert_eq!(writes_outran_reads(&reads, &writes), None, "through a protocol: the network's two directions");
        assert_eq!(writes_outran_reads(&writes, &reads), None, "reads faster than writes");
    }

    /// A soak across the wire holds a read and a write of the same shape on
    /// each end: the server's writes are held against the server's reads,
    /// whichever end's probes come first.
    #[test]
    fn each_ends_writes_are_held_against_that_ends_reads() {
        let on_server = |mut p: Probe| {
            p.host = Some("nas".into());
            p
        };
        let mut probes = vec![
            disk_probe("soak-write", "write", 8, "/mnt/f", 1.1e9),
            disk_probe("soak-read", "read", 8, "/mnt/f", 1.0e9),
            on_server(disk_probe("soak-remote-write", "write", 8, "/tank/f", 4.5e9)),
            on_server(disk_probe("soak-remote-read", "read", 8, "/tank/f", 2.5e9)),
        ];
        annotate_writes_outran_reads(&mut probes);
        assert_eq!(outran(&probes), ["soak-remote-write"]);
        assert!(probes[2].warnings[0].message.contains("1.8x soak-remote-read"), "{}", probes[2].warnings[0].message);
    }

    #[test]
    fn reads_held_at_their_cgroup_limit_are_not_the_disks() {
        let (mut reads, writes) = (disk_probe("r", "read", 8, "/a/f", 50e6), disk_probe("w", "write", 8, "/a/f", 1e9));
        assert_eq!(writes_outran_reads(&reads, &writes), Some(20.0));
        let limit = |bytes: Option<u64>, iops: Option<u64>| {
            let l = IoLimit {
                version: 1,
                cgroup: "/lab".into(),
                device: "7:0".into(),
                read_bytes_per_sec: bytes,
                read_iops: iops,
                ..IoLimit::default()
            };
            serde_json::to_value(l).unwrap()
        };
        reads.details.insert(IO_LIMIT.into(), limit(Some(52_000_000), None));
        assert_eq!(writes_outran_reads(&reads, &writes), None, "50 of a 52 MB/s limit");
        reads.details.insert(IO_LIMIT.into(), limit(Some(500_000_000), None));
        assert_eq!(writes_outran_reads(&reads, &writes), Some(20.0), "far below its limit: the disk's");
        reads.summary.iops = Some(48.0);
        reads.details.insert(IO_LIMIT.into(), limit(None, Some(50)));
        assert_eq!(writes_outran_reads(&reads, &writes), None, "48 of 50 reads per second");
    }

    #[test]
    fn synchronous_writes_that_outran_say_the_cache_acknowledges_flushes() {
        assert!(past_the_write_cache("vda", "fsync").starts_with("the writes were --sync fsync and still outran"));
        assert!(past_the_write_cache("vda", "none").starts_with("what reaches vda: --sync fsync"));
    }
}
