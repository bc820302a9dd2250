//! `headroom flushcheck`: does the storage keep what it acknowledged? `write`
//! runs on the machine under test until the power is cut, `verify` after the
//! reboot; `headroom serve --flushcheck-dir` on another machine keeps the
//! list of acknowledged blocks in between. The procedures are in
//! `headroom-flushcheck`; this file parses flags and wires them (an
//! nbd:// or iscsi:// export, or a file named by an smb:// or nfs:// URL,
//! is opened with headroom-proto's clients and headroom-disk's safety
//! checks, as `disk` opens it).

use crate::output::{Outcome, Output};
use anyhow::bail;
use headroom_disk::{prepare_share, Share, TargetOptions};
use headroom_flushcheck::{SyncMode, WriteOptions};
use headroom_net::wire::{FLUSH_BLOCK_RANGE, FLUSH_MAX_BLOCKS};
use headroom_net::Endpoint;
use headroom_proto::{Credentials, DiskPath, Opener, ShareTarget, ShareUrl};
use headroom_report::present::flushcheck as present;
use headroom_units::{format_size, DurationArg, Size};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// How long connecting to the listener and its answers may take.
const LISTENER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  headroom flushcheck write /mnt/data/fc.bin --to listener:5201 --token $TOKEN    on the machine under test
  headroom flushcheck verify /mnt/data/fc.bin --from listener:5201 --token $TOKEN  after the power cut and reboot
  headroom serve --bind 0.0.0.0 --token $TOKEN --flushcheck-dir /var/lib/headroom  the listener (another machine)
  headroom flushcheck write nbd://nas/disk0 --destructive --to listener:5201        a whole NBD export (FLUSH / FUA)
  headroom flushcheck write iscsi://nas/iqn.2004-01.x:t/0 --destructive --to ...    a whole LUN (SYNCHRONIZE CACHE / FUA)
  headroom flushcheck write smb://alice@nas/share/fc.bin --to ...                     a file over SMB (FLUSH / write-through)
  headroom flushcheck write nfs://nas/export/fc.bin --to ...                          a file over NFS (COMMIT / FILE_SYNC)

Exit codes of verify: 0 every acknowledged write survived (or --sync none, where losses
are expected), 1 the storage lost an acknowledged fsync/O_DSYNC write, 2 error.")]
pub struct FlushcheckArgs {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Write numbered blocks into a file of its own and report each acknowledged one to the listener, until Ctrl-C or power loss
    Write(WriteArgs),
    /// After the reboot: read every acknowledged block back (O_DIRECT) and list the ones the storage lost
    Verify(VerifyArgs),
}

fn check_listener(spec: &str) -> Result<Endpoint, String> {
    Endpoint::parse(spec, None, LISTENER_TIMEOUT)
}

#[derive(clap::Args, Debug)]
pub struct WriteArgs {
    /// The file to write: a new file, or one an earlier flushcheck wrote (anything else is refused),
    /// local or smb://[USER@]HOST/SHARE/[DIR/]FILE or nfs://HOST/EXPORT/[DIR/]FILE;
    /// or a whole export, nbd://HOST[:PORT]/EXPORT or iscsi://HOST[:PORT]/IQN/LUN (with --destructive)
    pub path: PathBuf,
    /// The `headroom serve --flushcheck-dir` on another machine that records acknowledged blocks
    #[arg(long, value_name = "HOST[:PORT]", value_parser = check_listener)]
    pub to: Endpoint,
    /// Token of the listener (`headroom serve --token`; also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// File size (one block of it is the header; 4k = 4096)
    #[arg(long, default_value = "1G")]
    pub size: Size,
    /// Block size: a power of two from 4K to 1M
    #[arg(long, default_value = "4K")]
    pub block: Size,
    /// How each block is made durable before it is reported
    #[arg(long, value_enum, default_value = "fsync")]
    pub sync: SyncArg,
    /// Stop after this long (default: until Ctrl-C or the power is cut)
    #[arg(long)]
    pub duration: Option<DurationArg>,
    /// nbd:// and iscsi://: the export's data may be destroyed (it is written over from its start)
    #[arg(long)]
    pub destructive: bool,
    /// nbd:// and iscsi://: write even over a filesystem, partition table or RAID signature found on the export
    #[arg(long)]
    pub force: bool,
    /// URLs: KEY=VALUE file (mode 600) with HEADROOM_SMB_USER, HEADROOM_SMB_PASSWORD,
    /// HEADROOM_SMB_DOMAIN, HEADROOM_ISCSI_USER, HEADROOM_ISCSI_PASSWORD (CHAP); the same keys
    /// are read from the environment. Never put a password in the URL
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
}

/// `--sync`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum SyncArg {
    /// fsync() after each block
    Fsync,
    /// open with O_DSYNC: each write returns once durable
    Dsync,
    /// no sync: blocks are acknowledged from the page cache (expected to be lost at a power cut)
    None,
}

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The file (local, smb:// or nfs://) or the nbd:// or iscsi:// export `flushcheck write` wrote
    pub path: PathBuf,
    /// The listener the writer reported to
    #[arg(long, value_name = "HOST[:PORT]", value_parser = check_listener)]
    pub from: Endpoint,
    /// Token of the listener (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// URLs: KEY=VALUE file (mode 600) with HEADROOM_SMB_USER, HEADROOM_SMB_PASSWORD,
    /// HEADROOM_SMB_DOMAIN, HEADROOM_ISCSI_USER, HEADROOM_ISCSI_PASSWORD (CHAP); the same keys
    /// are read from the environment. Never put a password in the URL
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
}

pub fn run(args: &FlushcheckArgs, out: &Output) -> anyhow::Result<Outcome> {
    match &args.action {
        Action::Write(w) => write(w, out),
        Action::Verify(v) => verify(v, out),
    }
}

/// The listener `--to`/`--from` named, with the token.
fn endpoint(listener: &Endpoint, token: &Option<String>) -> Endpoint {
    Endpoint { token: token.clone(), ..listener.clone() }
}

fn write(args: &WriteArgs, out: &Output) -> anyhow::Result<Outcome> {
    let block = args.block.0;
    if !block.is_power_of_two() || !FLUSH_BLOCK_RANGE.contains(&u32::try_from(block).unwrap_or(u32::MAX)) {
        bail!("--block {}: a power of two from 4K to 1M (example: --block 4K)", args.block);
    }
    let blocks = (args.size.0 / block).saturating_sub(1);
    if blocks == 0 {
        bail!(
            "--size {} with --block {} leaves no block after the header: give at least two blocks (example: --size 1G)",
            args.size,
            args.block
        );
    }
    if blocks > FLUSH_MAX_BLOCKS {
        bail!(
            "--size {} makes {blocks} blocks of {}; at most {FLUSH_MAX_BLOCKS}: give a larger --block (example: --block {}K)",
            args.size,
            args.block,
            (args.size.0 / FLUSH_MAX_BLOCKS + 1).next_power_of_two().max(4096) / 1024
        );
    }
    if args.duration.as_ref().is_some_and(|d| d.0.is_zero()) {
        bail!("--duration must be above zero (example: --duration 10m)");
    }
    let sync = match args.sync {
        SyncArg::Fsync => SyncMode::Fsync,
        SyncArg::Dsync => SyncMode::Dsync,
        SyncArg::None => SyncMode::None,
    };
    let target = DiskPath::parse(&args.path).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let export = target.share();
    if export.is_none() {
        if let Some(flag) = [("--destructive", args.destructive), ("--force", args.force)].iter().find(|f| f.1) {
            bail!("{} is for nbd:// and iscsi:// exports, and {} is a path", flag.0, args.path.display());
        }
        no_credentials_for_a_path(&args.credentials, &args.path)?;
    }
    let size = (blocks + 1) * block;
    let share = match export {
        Some(url) => Some(open_export(url, Some(size), args.destructive, args.force, &args.credentials)?),
        None => None,
    };
    let opts = WriteOptions {
        path: args.path.clone(),
        listener: endpoint(&args.to, &args.token),
        size,
        block_size: block as u32,
        sync,
        duration: args.duration.as_ref().map(|d| d.0),
        host: headroom_sys::hostname(&headroom_sys::SysRoot::live()).unwrap_or_default(),
    };
    let listener = opts.listener.display();
    let progress = out.progress;
    let mut on = |event: headroom_flushcheck::writer::WriteEvent| {
        use headroom_flushcheck::writer::WriteEvent as E;
        let line = match event {
            E::LayingOut(done, total) if progress => {
                format!("\rlaying out the file: {} of {}", format_size(done), format_size(total))
            }
            E::Started(run) => {
                format!("{}{}", if progress { "\n" } else { "" }, present::write_started(&run, &listener))
            }
            E::Acknowledged(n) if progress => format!("\r{n} blocks acknowledged"),
            E::Reconnecting(why) => format!("\nthe listener connection broke ({why}); opening it again\n"),
            _ => return,
        };
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(headroom_report::terminal_safe(&line, false).as_bytes());
        let _ = e.flush();
    };
    let stop = crate::signals::stop_flag();
    let report = match &share {
        Some(share) => headroom_flushcheck::write_export(share.as_ref(), &opts, stop, &mut on)?,
        None => headroom_flushcheck::write(&opts, stop, &mut on)?,
    };
    if progress {
        eprintln!();
    }
    if out.json {
        out.print_json(&report)?;
    } else {
        out.print(&present::write_summary(&report));
    }
    Ok(Outcome::Ok)
}

fn verify(args: &VerifyArgs, out: &Output) -> anyhow::Result<Outcome> {
    let listener = endpoint(&args.from, &args.token);
    let target = DiskPath::parse(&args.path).map_err(|e| anyhow::anyhow!(e.to_string()))?;
    let report = match target.share() {
        Some(url) => headroom_flushcheck::verify_export(
            open_export(url, None, false, false, &args.credentials)?.as_ref(),
            &listener,
        )?,
        None => {
            no_credentials_for_a_path(&args.credentials, &args.path)?;
            headroom_flushcheck::verify(&args.path, &listener)?
        }
    };
    if out.json {
        out.print_json(&report)?;
    } else {
        out.print(&present::verify(&report));
    }
    Ok(if report.storage_lied() { Outcome::GoalMissed } else { Outcome::Ok })
}

/// Opens an nbd:// or iscsi:// export as `disk` does, with the same checks
/// before a write (`size`: the bytes the run will write from the start):
/// `--destructive`, and no signature libblkid knows unless `--force`. An
/// smb:// or nfs:// URL names the file itself (created exclusively, or
/// reused when it carries a flushcheck header: the writer checks).
fn open_export(
    share: &ShareTarget,
    size: Option<u64>,
    destructive: bool,
    force: bool,
    credentials: &Option<PathBuf>,
) -> anyhow::Result<Box<dyn Share>> {
    let url = share.as_str();
    let named_file = matches!(share.url(), ShareUrl::Nfs(_) | ShareUrl::Smb(_));
    if named_file {
        if let Some(flag) = [("--destructive", destructive), ("--force", force)].iter().find(|f| f.1) {
            bail!(
                "{} is for nbd:// and iscsi:// exports; {url} names a file of flushcheck's own, \
                 which needs neither (leave {} out)",
                flag.0,
                flag.0
            );
        }
    }
    let credentials = Credentials::load(credentials.as_deref()).map_err(|e| anyhow::anyhow!(crate::flags::line(&e)))?;
    let options = TargetOptions {
        size,
        default_size: size.unwrap_or(0),
        writes: size.is_some(),
        destructive,
        force,
        keep: true,
        named_file,
        // Ctrl-C ends a login or a request the server leaves unanswered at once
        // (and the signal thread is up before the first connection).
        stop: crate::signals::shared_stop_flag(),
    };
    prepare_share(&Opener::new(credentials).for_share(share.clone()), url, &options)
        .map_err(|e| anyhow::anyhow!(crate::flags::line(&e)))
}

/// `--credentials` is for URLs: with a local path it is a mistake to say so.
fn no_credentials_for_a_path(credentials: &Option<PathBuf>, path: &std::path::Path) -> anyhow::Result<()> {
    if credentials.is_some() {
        bail!("--credentials is for smb://, nfs://, iscsi:// and nbd:// targets, and {} is a path", path.display());
    }
    Ok(())
}
