//! `headroom run --server NAS --remote-path DIR --share nfs://NAS/DIR` in the
//! lab: the NAS namespace serves the directory over NFS (nfs-ganesha) and runs
//! `headroom serve --allow-path DIR`; the link is shaped like gigabit
//! Ethernet. One run measures the server's own disk, the network and NFS by
//! headroom's own client, and the verdict's chain holds all of it: the
//! server's disk (on the NAS), the link, the protocol hop with its ceiling
//! from the header model, and the client's figure; the link is the limit.

use headroom_lab::nas::Nas;
use headroom_lab::netns::ChildGuard;
use headroom_limits::{tbf_rate_emulating, Framing};
use headroom_result::{Hop, ResultDoc};
use std::process::Stdio;
use std::time::Duration;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

#[test]
fn one_run_holds_the_servers_disk_nfs_and_the_link_in_one_verdict() {
    headroom_lab::require_root!();
    for program in ["ganesha.nfsd", "rpcbind", "unshare"] {
        headroom_lab::require_program!(program);
    }
    let _machine = headroom_lab::hold_machine();
    let mut nas = Nas::new().expect("lab NAS");
    nas.shape(tbf_rate_emulating(1e9, &Framing::default()) as u64).expect("tbf");
    let dir = nas.subdir("export").expect("export dir");
    let export = nas.serve_nfs(&dir, None).expect("ganesha");
    let addr = nas.addr().to_string();
    let serve = nas
        .server()
        .command(exe())
        .args(["serve", "--bind", &addr, "--no-auth", "--quiet", "--allow-path", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("headroom serve on the NAS");
    let _serve = ChildGuard(Some(serve));
    nas.wait_for_port(5201, Duration::from_secs(10)).expect("serve listens");

    let out = nas
        .client()
        .command(exe())
        .args(["run", "--server", &addr, "--remote-path", dir.to_str().unwrap(), "--share", &export.url])
        .args(["--link", "1gbe", "--json"])
        .stdin(Stdio::null())
        .output()
        .expect("headroom run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).expect("a result document");

    let over_nfs: Vec<_> = doc.probes.iter().filter(|p| p.id.starts_with("seq1m") && p.host.is_none()).collect();
    assert!(!over_nfs.is_empty(), "the share's probes ran here");
    for p in &over_nfs {
        let headroom_result::ProbeSpec::Disk(d) = &p.spec else { panic!("{} is a disk probe", p.id) };
        assert_eq!(d.protocol.as_ref().map(|i| i.name.as_str()), Some("nfs"), "{}", p.id);
    }
    assert!(doc.probes.iter().any(|p| p.host.is_some()), "the server measured its own disk");
    let verdict = doc.verdict.expect("a verdict");
    for dir in &verdict.directions {
        let hop = |h: Hop| dir.hops.iter().find(|f| f.hop == h);
        let disk = hop(Hop::Disk).expect("the server's disk in the chain");
        assert!(disk.host.is_some(), "the disk hop is on the NAS: {disk:?}");
        let protocol = hop(Hop::Protocol).expect("the protocol hop");
        let link = hop(Hop::Link).expect("the link hop");
        let (p, l) = (protocol.ceiling_bytes_per_sec.unwrap(), link.ceiling_bytes_per_sec.unwrap());
        // NFSv3's 132 header bytes per 1 MiB read: 99.99% of TCP.
        assert!(p < l && p > l * 0.999, "protocol ceiling {p} against the link's {l}");
        let client = hop(Hop::Client).and_then(|c| c.measured_bytes_per_sec).expect("the client's figure");
        // Gigabit's TCP ceiling is 117.7 MB/s; NFS over it gets close, never above.
        assert!(client > l * 0.90 && client < l * 1.02, "{:?}: {client} against {l}", dir.direction);
        assert_eq!(dir.limiting_hop, Some(Hop::Link), "{:?}: {}", dir.direction, dir.explanation);
    }
}
