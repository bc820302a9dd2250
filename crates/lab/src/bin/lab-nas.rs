//! `lab-nas`: the lab NAS for trying headroom's protocol clients by hand
//! (`scripts/lab.sh nas`) and for the protocol benchmarks: a NAS namespace
//! serving NFS, SMB, NBD and iSCSI from one directory and one file, a client
//! namespace to run headroom in, optionally shaped with tbf. Prints one
//! `KEY=VALUE` line per fact, then waits until Ctrl-C or SIGTERM, the file
//! `--stop-file` exists (else: stdin closes) or `--seconds` pass; everything
//! is removed then.

use headroom_lab::nas::nbd::{NbdBacking, NbdOptions};
use headroom_lab::nas::smb::{SmbOptions, SMB_PASSWORD};
use headroom_lab::nas::Nas;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Args {
    rate_bits: Option<u64>,
    seconds: u64,
    stop_file: Option<PathBuf>,
    size: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: lab-nas [--rate BITS] [--size BYTES] [--seconds N] [--stop-file FILE]\n\
         --rate: the Ethernet link to emulate, bits/s (tbf shaped so TCP gets what it carries)\n\
         Serves NFS, SMB, NBD and iSCSI from a namespace until stdin closes or Ctrl-C. Needs root."
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args { rate_bits: None, seconds: 3600, stop_file: None, size: 1 << 30 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--rate" => args.rate_bits = Some(value().parse().unwrap_or_else(|_| usage())),
            "--seconds" => args.seconds = value().parse().unwrap_or_else(|_| usage()),
            "--size" => args.size = value().parse().unwrap_or_else(|_| usage()),
            "--stop-file" => args.stop_file = Some(PathBuf::from(value())),
            _ => usage(),
        }
    }
    args
}

fn main() {
    if !headroom_lab::is_root() {
        eprintln!("lab-nas: needs root (network namespaces, servers on privileged ports)");
        std::process::exit(2);
    }
    let args = parse_args();
    if let Err(e) = serve(&args) {
        eprintln!("lab-nas: {e}");
        std::process::exit(1);
    }
}

fn serve(args: &Args) -> std::io::Result<()> {
    let mut nas = Nas::new()?;
    if let Some(bits) = args.rate_bits {
        // tbf counts frames without preamble and gap: shape so TCP sees what a
        // real Ethernet link of this rate carries (then `--link RATE` is exact).
        let framing = headroom_limits::Framing::default();
        nas.shape(headroom_limits::shaper::tbf_rate_emulating(bits as f64, &framing) as u64)?;
    }
    let share = nas.subdir("share")?;
    let image = nas.dir().join("export.img");
    std::fs::File::create(&image)?.set_len(args.size)?;
    let nfs = nas.serve_nfs(&share, None)?;
    let smb = nas.serve_smb(&share, SmbOptions::default())?;
    let nbd = nas.serve_nbd("disk", &NbdBacking::File(image.clone()), NbdOptions::default())?;
    let lun_image = nas.dir().join("lun.img");
    std::fs::File::create(&lun_image)?.set_len(args.size)?;
    let iscsi = nas.serve_iscsi(&lun_image, None, None)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "CLIENT_NS={}", nas.client().name)?;
    writeln!(out, "NAS_NS={}", nas.server().name)?;
    writeln!(out, "NAS_ADDR={}", nas.addr())?;
    writeln!(out, "SHARE_DIR={}", share.display())?;
    writeln!(out, "NFS_URL={}", nfs.url)?;
    writeln!(out, "SMB_URL={}", smb.url_with_user())?;
    writeln!(out, "SMB_PASSWORD={SMB_PASSWORD}")?;
    writeln!(out, "NBD_URL={}", nbd.url)?;
    writeln!(out, "ISCSI_URL={}", iscsi.url)?;
    writeln!(out, "READY=1")?;
    out.flush()?;
    drop(out);
    wait(args);
    drop(iscsi); // its control socket files go with it
    Ok(())
}

/// Until Ctrl-C or SIGTERM, the stop file appears (else stdin closes) or
/// the time is up; the NAS guard then removes everything.
fn wait(args: &Args) {
    let (tx, rx) = std::sync::mpsc::channel();
    let on_signal = tx.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        let _ = on_signal.send(());
    }) {
        eprintln!("lab-nas: no Ctrl-C handler ({e}); stop it by closing stdin");
    }
    // Without a stop file, stdin closing is the stop (the shell that started it went away).
    if args.stop_file.is_none() {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            let _ = tx.send(());
        });
    }
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() < deadline && !args.stop_file.as_ref().is_some_and(|f| f.exists()) {
        if rx.recv_timeout(Duration::from_millis(200)).is_ok() {
            return;
        }
    }
}
