//! `flushcheck write`: lays out a file of its own, then writes numbered
//! blocks round and round it, makes each durable as asked and reports it to
//! the listener once the storage acknowledged it, until stopped.
//!
//! Safety: it creates the file, or reuses one that carries a flushcheck
//! header; anything else (an existing file, a device, a directory) is
//! refused. A file it created and had not finished laying out when stopped
//! is removed; a laid-out file stays, since `verify` needs it after the
//! power cut.

use crate::block::{self, RunId};
use crate::report::{WriteReport, SCHEMA};
use crate::{FlushError, SyncMode};
use headroom_net::wire::{self, FlushAck, FlushRun};
use headroom_net::{Endpoint, NetError, Session};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How many times a writer opens its session to the listener again when it
/// breaks (the listener restarted, a switch flapped) before giving up.
const RECONNECTS: u32 = 5;
const LAYOUT_CHUNK: usize = 1 << 20;

/// What to write, where, and whom to tell.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// The file (created, or a flushcheck file reused).
    pub path: PathBuf,
    /// The listener (`headroom serve --flushcheck-dir`).
    pub listener: Endpoint,
    /// File size, bytes (the header block included).
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
        return Err(refuse(
            "exists and is not a flushcheck file: headroom never overwrites data it did not create; \
             give a new file name (example: /mnt/data/flushcheck.bin)",
        ));
    }
    Ok(true)
}

/// Writes the header and filler over the whole file, then makes the file
/// and its directory entry durable: the blocks later written overwrite
/// allocated space, so what flushcheck tests is data, not allocation.
fn lay_out(
    path: &Path,
    f: &File,
    run: &FlushRun,
    size: u64,
    stop: &AtomicBool,
    on: &mut dyn FnMut(WriteEvent),
) -> Result<bool, FlushError> {
    f.set_len(size).map_err(FlushError::io(path))?;
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
        crate::os::write_all_at(f, &buf[..n], done).map_err(FlushError::io(path))?;
        done += n as u64;
        on(WriteEvent::LayingOut(done, size));
    }
    f.sync_all().map_err(FlushError::io(path))?;
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

/// Runs the writer until `stop` is set or the duration is over.
pub fn write(
    opts: &WriteOptions,
    stop: &AtomicBool,
    on: &mut dyn FnMut(WriteEvent),
) -> Result<WriteReport, FlushError> {
    let path = opts.path.as_path();
    let existed = check_path(path)?;
    let id: RunId = wire::random_key();
    let bs = u64::from(opts.block_size);
    let run = FlushRun {
        run: wire::to_hex(&id),
        block_size: opts.block_size,
        blocks: opts.size / bs - 1,
        sync: opts.sync.name().into(),
        path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string(),
        host: opts.host.clone(),
    };
    run.validate().map_err(|reason| FlushError::File { path: path.to_path_buf(), reason })?;
    // Before laying out a large file: is the listener there and willing?
    let mut listener = Listener::open(&opts.listener, &run)?;
    // A new file is created exclusively: nothing that appeared since the check is overwritten.
    let f = OpenOptions::new().write(true).create_new(!existed).open(path).map_err(FlushError::io(path))?;
    let laid_out = lay_out(path, &f, &run, (run.blocks + 1) * bs, stop, on);
    drop(f);
    if !matches!(laid_out, Ok(true)) && !existed {
        let _ = std::fs::remove_file(path);
    }
    if !laid_out? {
        return Err(FlushError::File { path: path.to_path_buf(), reason: "stopped while laying out the file".into() });
    }
    let f = crate::os::open_for_writes(path, opts.sync == SyncMode::Dsync).map_err(FlushError::io(path))?;
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
        let checksum = block::fill(buf.bytes_mut(), &id, seq, offset);
        crate::os::write_all_at(&f, buf.bytes(), offset).map_err(FlushError::io(path))?;
        written += 1;
        if opts.sync == SyncMode::Fsync {
            f.sync_all().map_err(FlushError::io(path))?;
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
        run,
        listener: opts.listener.display(),
        written,
        acknowledged,
        duration_s,
        acks_per_sec: if duration_s > 0.0 { acknowledged as f64 / duration_s } else { 0.0 },
        stopped_by: stopped_by.into(),
    })
}
