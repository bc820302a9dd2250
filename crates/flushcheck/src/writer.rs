//! `flushcheck write`: lays out a file of its own (or a whole export reached
//! through a protocol client), then writes numbered blocks round and round
//! it, makes each durable as asked and reports it to the listener once the
//! storage acknowledged it, until stopped. Both go through [`Storage`], so
//! the procedure is written once.
//!
//! Safety: it creates the file, or reuses one that carries a flushcheck
//! header; anything else (an existing file, a device, a directory) is
//! refused. A file it created and had not finished laying out when stopped
//! is removed; a laid-out file stays, since `verify` needs it after the
//! power cut. An export is checked by the caller (`--destructive`,
//! `--force`), not here. A file on an SMB or NFS share named by its URL
//! is created exclusively by the protocol client, or reused only when its
//! first block is a flushcheck header; it is never removed.

use crate::block::{self, RunId};
use crate::report::{WriteReport, SCHEMA};
use crate::storage::{LocalFile, ShareStorage, Storage};
use crate::{FlushError, Setting, SyncMode};
use headroom_disk::Share;
use headroom_net::wire::{self, FlushAck, FlushRun};
use headroom_net::{Endpoint, NetError, Session};
use headroom_units::setting::Message;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How many times a writer opens its session to the listener again when it
/// breaks (the listener restarted, a switch flapped) before giving up.
const RECONNECTS: u32 = 5;
const LAYOUT_CHUNK: usize = 1 << 20;
/// Why a file that is there and not flushcheck's is refused.
const NOT_OURS: &str = "exists and is not a flushcheck file: headroom never overwrites data it did not create; \
     give a new file name (example: /mnt/data/flushcheck.bin)";

/// What to write, where, and whom to tell.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// The file (created, or a flushcheck file reused); not used for an export.
    pub path: PathBuf,
    /// The listener (`headroom serve --flushcheck-dir`).
    pub listener: Endpoint,
    /// File size, bytes (the header block included); at most this much of an export.
    pub size: u64,
    /// Block size, bytes: a power of two from 4 KiB to 1 MiB.
    pub block_size: u32,
    /// How each block is made durable.
    pub sync: SyncMode,
    /// Stop after this long (None: until stopped).
    pub duration: Option<Duration>,
    /// This machine's name, recorded with the run.
    pub host: String,
}

/// What the writer is doing, for a progress line.
#[derive(Debug, Clone)]
pub enum WriteEvent {
    /// Laying out the file (bytes done, of total).
    LayingOut(u64, u64),
    /// Blocks are being written; the run is recorded on the listener.
    Started(FlushRun),
    /// Acknowledged blocks so far.
    Acknowledged(u64),
    /// The listener connection broke; opening it again.
    Reconnecting(String),
}

/// Refuses a path that holds anything but a flushcheck file; true when it exists.
fn check_path(path: &Path) -> Result<bool, FlushError> {
    let refuse = |reason: &str| FlushError::File { path: path.to_path_buf(), reason: reason.to_string() };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(FlushError::Io { path: path.to_path_buf(), source: e }),
    };
    if !meta.file_type().is_file() {
        return Err(refuse(
            "exists and is not a regular file: flushcheck writes a file of its own (example: /mnt/data/flushcheck.bin)",
        ));
    }
    let mut head = [0u8; 8];
    let mut f = File::open(path).map_err(FlushError::io(path))?;
    if f.read_exact(&mut head).is_err() || !block::is_flushcheck(&head) {
        return Err(refuse(NOT_OURS));
    }
    Ok(true)
}

/// Writes the header and filler over the whole target, then makes it
/// durable: the blocks later written overwrite allocated space, so what
/// flushcheck tests is data, not allocation. False when stopped first.
fn lay_out(
    store: &mut dyn Storage,
    run: &FlushRun,
    size: u64,
    stop: &AtomicBool,
    on: &mut dyn FnMut(WriteEvent),
) -> std::io::Result<bool> {
    let mut rng = fastrand::Rng::new();
    let mut buf = vec![0u8; LAYOUT_CHUNK];
    let bs = run.block_size as usize;
    let mut done = 0u64;
    while done < size {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let n = (size - done).min(LAYOUT_CHUNK as u64) as usize;
        for b in buf[..n].chunks_mut(bs) {
            block::filler(b, &mut rng);
        }
        if done == 0 {
            buf[..bs].copy_from_slice(&block::header(run));
        }
        store.write_at(&buf[..n], done)?;
        done += n as u64;
        on(WriteEvent::LayingOut(done, size));
    }
    store.make_durable()?;
    Ok(true)
}

/// The local file laid out: created (or reused) and sized, then the file and
/// its directory entry made durable.
fn lay_out_file(
    path: &Path,
    existed: bool,
    run: &FlushRun,
    size: u64,
    stop: &AtomicBool,
    on: &mut dyn FnMut(WriteEvent),
) -> Result<bool, FlushError> {
    // A new file is created exclusively: nothing that appeared since the check is overwritten.
    let f = OpenOptions::new().write(true).create_new(!existed).open(path).map_err(FlushError::io(path))?;
    f.set_len(size).map_err(FlushError::io(path))?;
    if !lay_out(&mut LocalFile(f), run, size, stop, on).map_err(FlushError::io(path))? {
        return Ok(false);
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir).and_then(|d| d.sync_all()).map_err(FlushError::io(dir))?;
    Ok(true)
}

/// The session to the listener, opened again when it breaks.
struct Listener<'a> {
    at: &'a Endpoint,
    run: &'a FlushRun,
    session: Session,
}

impl<'a> Listener<'a> {
    fn open(at: &'a Endpoint, run: &'a FlushRun) -> Result<Listener<'a>, FlushError> {
        let mut session = Session::open(at)?;
        session.flush_begin(run)?;
        Ok(Listener { at, run, session })
    }

    fn ack(&mut self, ack: FlushAck, stop: &AtomicBool, on: &mut dyn FnMut(WriteEvent)) -> Result<(), FlushError> {
        let mut tries = 0;
        loop {
            match self.session.flush_ack(&self.run.run, ack) {
                Ok(()) => return Ok(()),
                Err(e @ (NetError::Broken(_) | NetError::Io(_))) if tries < RECONNECTS => {
                    tries += 1;
                    on(WriteEvent::Reconnecting(e.to_string()));
                    std::thread::sleep(Duration::from_secs(1));
                    if stop.load(Ordering::Relaxed) {
                        return Err(e.into());
                    }
                    match Session::open(self.at).and_then(|mut s| s.flush_begin(self.run).map(|()| s)) {
                        Ok(s) => self.session = s,
                        Err(e) if tries >= RECONNECTS => return Err(e.into()),
                        Err(_) => {}
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A new run of `blocks` blocks after the header, recorded as written to `at`.
fn new_run(opts: &WriteOptions, at: String, blocks: u64) -> Result<(RunId, FlushRun), FlushError> {
    let id: RunId = wire::random_key();
    let run = FlushRun {
        run: wire::to_hex(&id),
        block_size: opts.block_size,
        blocks,
        sync: opts.sync.name().into(),
        path: at,
        host: opts.host.clone(),
    };
    run.validate().map_err(|reason| FlushError::File { path: opts.path.clone(), reason })?;
    Ok((id, run))
}

/// Runs the writer on the local file `opts.path` until `stop` is set or the duration is over.
pub fn write(
    opts: &WriteOptions,
    stop: &AtomicBool,
    on: &mut dyn FnMut(WriteEvent),
) -> Result<WriteReport, FlushError> {
    let path = opts.path.as_path();
    let existed = check_path(path)?;
    let bs = u64::from(opts.block_size);
    let at = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string();
    let (id, run) = new_run(opts, at, opts.size / bs - 1)?;
    // Before laying out a large file: is the listener there and willing?
    let listener = Listener::open(&opts.listener, &run)?;
    let laid_out = lay_out_file(path, existed, &run, (run.blocks + 1) * bs, stop, on);
    if !matches!(laid_out, Ok(true)) && !existed {
        let _ = std::fs::remove_file(path);
    }
    if !laid_out? {
        return Err(FlushError::File { path: path.to_path_buf(), reason: "stopped while laying out the file".into() });
    }
    let f = crate::os::open_for_writes(path, opts.sync == SyncMode::Dsync).map_err(FlushError::io(path))?;
    write_blocks(&mut LocalFile(f), path, opts, &id, &run, listener, stop, on)
}

/// Runs the writer on a whole export or a file share's named file
/// (`opts.path` is ignored): the caller opened it with headroom-disk's
/// `prepare_share`, which refuses an export without `--destructive` or one
/// holding a signature without `--force`; a named file that was there
/// already is refused here unless it starts with a flushcheck header. The
/// run takes `opts.size` or the target's size, whichever is smaller.
pub fn write_export(
    share: &dyn Share,
    opts: &WriteOptions,
    stop: &AtomicBool,
    on: &mut dyn FnMut(WriteEvent),
) -> Result<WriteReport, FlushError> {
    let url = share.url();
    let name = PathBuf::from(&url);
    let bs = u64::from(opts.block_size);
    if bs % share.block_size().max(1) != 0 {
        return Err(FlushError::Invalid {
            path: name,
            reason: Message::text(format!("the export's blocks are {} bytes and ", share.block_size()))
                .and(Setting::Block)
                .then(format!(" {bs} is not a multiple of them")),
        });
    }
    let blocks = (opts.size.min(share.size()) / bs).saturating_sub(1);
    if blocks == 0 {
        return Err(FlushError::File {
            path: name,
            reason: format!("the export ({} bytes) holds no block after the header", share.size()),
        });
    }
    if share.existed() {
        let mut head = crate::io::AlignedBuf::new(crate::io::ALIGN);
        let mut probe = ShareStorage::connect(share, None, crate::io::ALIGN).map_err(FlushError::io(&name))?;
        let n = probe.read_at(head.bytes_mut(), 0).map_err(FlushError::io(&name))?;
        if !block::is_flushcheck(&head.bytes()[..n]) {
            return Err(FlushError::File { path: name, reason: NOT_OURS.into() });
        }
    }
    let (id, run) = new_run(opts, url, blocks)?;
    let listener = Listener::open(&opts.listener, &run)?;
    let chunk = LAYOUT_CHUNK.max(opts.block_size as usize);
    let mut layout = ShareStorage::connect(share, Some(SyncMode::None), chunk).map_err(FlushError::io(&name))?;
    if !lay_out(&mut layout, &run, (run.blocks + 1) * bs, stop, on).map_err(FlushError::io(&name))? {
        return Err(FlushError::File { path: name, reason: "stopped while laying out the export".into() });
    }
    drop(layout);
    let mut store =
        ShareStorage::connect(share, Some(opts.sync), opts.block_size as usize).map_err(FlushError::io(&name))?;
    write_blocks(&mut store, &name, opts, &id, &run, listener, stop, on)
}

/// Writes numbered blocks round and round the laid-out target, each made
/// durable as asked before the listener hears of it.
#[allow(clippy::too_many_arguments)]
fn write_blocks(
    store: &mut dyn Storage,
    name: &Path,
    opts: &WriteOptions,
    id: &RunId,
    run: &FlushRun,
    mut listener: Listener<'_>,
    stop: &AtomicBool,
    on: &mut dyn FnMut(WriteEvent),
) -> Result<WriteReport, FlushError> {
    let bs = u64::from(opts.block_size);
    on(WriteEvent::Started(run.clone()));
    let started = Instant::now();
    let mut buf = crate::io::AlignedBuf::new(opts.block_size as usize);
    let (mut written, mut acknowledged) = (0u64, 0u64);
    let mut shown = Instant::now();
    let stopped_by = loop {
        if stop.load(Ordering::Relaxed) {
            break "interrupted";
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break "duration";
        }
        let seq = written + 1;
        let offset = bs * (1 + (seq - 1) % run.blocks);
        let checksum = block::fill(buf.bytes_mut(), id, seq, offset);
        store.write_at(buf.bytes(), offset).map_err(FlushError::io(name))?;
        written += 1;
        if opts.sync == SyncMode::Fsync {
            store.make_durable().map_err(FlushError::io(name))?;
        }
        listener.ack(FlushAck { seq, offset, checksum }, stop, on)?;
        acknowledged += 1;
        if shown.elapsed() >= Duration::from_secs(1) {
            shown = Instant::now();
            on(WriteEvent::Acknowledged(acknowledged));
        }
    };
    listener.session.close();
    let duration_s = started.elapsed().as_secs_f64();
    Ok(WriteReport {
        schema: SCHEMA.into(),
        mode: "write".into(),
        run: run.clone(),
        listener: opts.listener.display(),
        written,
        acknowledged,
        duration_s,
        acks_per_sec: if duration_s > 0.0 { acknowledged as f64 / duration_s } else { 0.0 },
        stopped_by: stopped_by.into(),
    })
}
