//! `iscsi://HOST[:PORT]/IQN/LUN`: headroom's own iSCSI initiator (RFC 7143
//! subset, error recovery level 0, no digests). One session per worker, the
//! worker's queue depth as SCSI commands in flight within the target's
//! CmdSN window; READ(16)/WRITE(16) (FUA for dsync), SYNCHRONIZE CACHE(10)
//! for fsync. What the target granted at login goes into the result. With
//! several sources each worker's session leaves from its turn of them
//! (round robin, as multipathing spreads sessions over NICs).
//!
//! Not libiscsi: its API hides every negotiated value (no getter for
//! MaxRecvDataSegmentLength, MaxBurstLength, MaxOutstandingR2T or the
//! CmdSN window) and queues beyond the window silently, so the result could
//! neither record what the target granted nor warn when it capped the
//! queue depth.

#[cfg(test)]
mod captured_frames;
mod commands;
mod pdu;
mod scsi;
mod session;

pub use crate::iscsi_keys::IscsiKeys;
use crate::transport::Spread;
use crate::ProtoError;
use commands::{read_capacity, ready, report_luns};
use headroom_disk::{Completion, IoEngine, IoUnit, Setting, Share, ShareIo, ShareKind, SyncMode, TargetOptions};
use headroom_result::ProtocolInfo;
use headroom_units::setting::Message;
use scsi::{cdb, describe_status, device_type_name, opcode, status};
use session::{LoginError, LoginSpec, Session};
use std::io;
use std::sync::{Arc, Mutex};

/// A LUN reached over iSCSI: a whole export (written only with `--destructive`).
#[derive(Debug)]
struct IscsiShare {
    shown: String,
    spec: Spec,
    size: u64,
    capacity: u64,
    block_size: u64,
    info: Arc<Mutex<ProtocolInfo>>,
    spread: Spread,
}

#[derive(Clone)]
struct Spec(LoginSpec);

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the CHAP secret.
        write!(f, "{} {} LUN {}", self.0.addr, self.0.target, self.0.lun)
    }
}

/// Logs in to the target, checks the LUN is a disk and finds its size.
pub fn open(
    url: &crate::url::IscsiUrl,
    opts: &TargetOptions,
    credentials: &crate::Credentials,
    sources: &[crate::Source],
    keys: &IscsiKeys,
) -> Result<Box<dyn Share>, ProtoError> {
    let spread = Spread::new(sources);
    let shown = format!("iscsi://{}/{}/{}", url.server, url.target, url.lun);
    let chap = match (credentials.get("HEADROOM_ISCSI_USER"), credentials.get("HEADROOM_ISCSI_PASSWORD")) {
        (Some(u), Some(p)) => Some((u.to_string(), p.to_string())),
        (None, None) => None,
        _ => {
            return Err(ProtoError::Usage(format!(
                "{shown}: CHAP needs both HEADROOM_ISCSI_USER and HEADROOM_ISCSI_PASSWORD (one is set), \
                 e.g. HEADROOM_ISCSI_USER=alice HEADROOM_ISCSI_PASSWORD=... headroom disk {shown}"
            )))
        }
    };
    let spec = LoginSpec {
        addr: url.server.addr(),
        target: url.target.clone(),
        chap,
        lun: url.lun,
        stop: Arc::clone(&opts.stop),
        source: spread.for_job(0).clone(),
        keys: keys.clone(),
    };
    let mut s = Session::login(&spec, 1, 4096).map_err(|e| login_error(&shown, &spec, e))?;
    let fail = |what: &str, e: io::Error| ProtoError::of_kind(e.kind(), format!("{shown}: {what}: {e}"));
    let luns = report_luns(&mut s).map_err(|e| fail("REPORT LUNS", e))?;
    if !luns.is_empty() && !luns.contains(&url.lun) {
        let list: Vec<String> = luns.iter().map(u16::to_string).collect();
        return Err(ProtoError::Usage(format!(
            "{shown}: target {} has no LUN {}; its LUNs are {} (e.g. iscsi://{}/{}/{})",
            url.target,
            url.lun,
            list.join(", "),
            url.server,
            url.target,
            luns.iter().copied().find(|&l| l != 0).unwrap_or(luns[0])
        )));
    }
    ready(&mut s).map_err(|e| fail("TEST UNIT READY", e))?;
    let inquiry = s.command(cdb(&[opcode::INQUIRY, 0, 0, 0, 96, 0]), 96).map_err(|e| fail("INQUIRY", e))?;
    if inquiry.status != status::GOOD || inquiry.data.is_empty() {
        return Err(fail("INQUIRY", io::Error::other(describe_status(inquiry.status, &inquiry.sense))));
    }
    let device_type = inquiry.data[0] & scsi::PERIPHERAL_TYPE_MASK;
    if device_type != scsi::DIRECT_ACCESS {
        let hint = luns.iter().find(|&&l| l != url.lun).map(|l| format!("; try LUN {l}")).unwrap_or_default();
        return Err(ProtoError::Usage(format!(
            "{shown}: LUN {} is a {} (SCSI peripheral type 0x{device_type:02x}), not a disk{hint}",
            url.lun,
            device_type_name(device_type)
        )));
    }
    let (blocks, block_size) = read_capacity(&mut s).map_err(|e| fail("READ CAPACITY(16)", e))?;
    let capacity = blocks * block_size;
    let size = match opts.size {
        Some(asked) if asked > capacity => {
            return Err(ProtoError::Invalid(
                Message::of(Setting::Size)
                    .then(format!(" {asked}: LUN {} of {} holds only {capacity} bytes; use ", url.lun, url.target))
                    .and(Setting::Size)
                    .then(format!(" {}M or less", capacity >> 20)),
            ))
        }
        Some(asked) => asked - asked % block_size,
        None => capacity,
    };
    let mut granted = granted(&s.params);
    granted.extend(keys.asked_numbers());
    // The window once commands run: targets open it after login (tgt
    // announces 2 at login, then its queue of 128).
    granted.insert("cmdsn_window".into(), u64::from(s.window()));
    granted.insert("block_size".into(), block_size);
    granted.insert("capacity_bytes".into(), capacity);
    let mut info = ProtocolInfo {
        name: "iscsi".into(),
        version: None,
        server: url.server.addr(),
        queue_depth_granted: None,
        granted,
        ..ProtocolInfo::default()
    };
    s.origin(&spec.source).record(&mut info);
    drop(s);
    let info = Arc::new(Mutex::new(info));
    Ok(Box::new(IscsiShare { shown, spec: Spec(spec), size, capacity, block_size, info, spread }))
}

/// One line saying why login failed, naming the URL.
fn login_error(shown: &str, spec: &LoginSpec, e: LoginError) -> ProtoError {
    let msg = match e {
        LoginError::Status(2, 1) if spec.chap.is_some() => ProtoError::Auth(format!(
            "CHAP authentication failed for user '{}': check HEADROOM_ISCSI_USER and HEADROOM_ISCSI_PASSWORD",
            spec.chap.as_ref().map_or("", |c| c.0.as_str())
        )),
        LoginError::Status(2, 1) => ProtoError::Invalid(
            Message::text(
                "the target requires CHAP: set HEADROOM_ISCSI_USER and HEADROOM_ISCSI_PASSWORD (environment or ",
            )
            .and(Setting::Credentials)
            .then(" FILE)"),
        ),
        LoginError::Status(2, 3) => {
            ProtoError::Usage(format!("the portal has no target named '{}' (login status 0x0203)", spec.target))
        }
        LoginError::Status(2, 2) => ProtoError::Auth(format!(
            "the target '{}' does not allow this initiator ({}) from this address (its ACL)",
            spec.target,
            session::INITIATOR_NAME
        )),
        LoginError::Status(c, d) => {
            ProtoError::Usage(format!("login refused: {} (status 0x{c:02x}{d:02x})", pdu::login_status(c, d)))
        }
        LoginError::Other(e) => e.context("login failed"),
    };
    msg.context(shown)
}

/// The negotiated keys as numbers, by their RFC 7143 names.
fn granted(p: &session::Params) -> std::collections::BTreeMap<String, u64> {
    [
        ("MaxRecvDataSegmentLength_target", u64::from(p.target_max_recv)),
        ("MaxRecvDataSegmentLength_initiator", u64::from(p.initiator_max_recv)),
        ("MaxBurstLength", u64::from(p.max_burst)),
        ("FirstBurstLength", u64::from(p.first_burst)),
        ("MaxOutstandingR2T", u64::from(p.max_outstanding_r2t)),
        ("ImmediateData", u64::from(p.immediate_data)),
        ("InitialR2T", u64::from(p.initial_r2t)),
        ("DataPDUInOrder", u64::from(p.data_pdu_in_order)),
        ("DataSequenceInOrder", u64::from(p.data_sequence_in_order)),
        ("cmdsn_window", u64::from(p.cmdsn_window)),
        ("cmdsn_window_at_login", u64::from(p.cmdsn_window)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Share for IscsiShare {
    fn url(&self) -> String {
        self.shown.clone()
    }
    fn kind(&self) -> ShareKind {
        ShareKind::Export
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn block_size(&self) -> u64 {
        self.block_size
    }
    fn connect(&self, io: ShareIo) -> io::Result<Box<dyn IoEngine + Send>> {
        let spec = LoginSpec { source: self.spread.for_job(io.job).clone(), ..self.spec.0.clone() };
        let mut s = Session::login(&spec, io.depth, io.buf_size)
            .map_err(|e| self.spread.named(io.job, io::Error::other(login_error(&self.shown, &spec, e).to_string())))?;
        self.spread.note(io.job, s.origin(&spec.source));
        s.set_io(self.block_size as u32, io.sync == SyncMode::Dsync);
        ready(&mut s).map_err(|e| io::Error::new(e.kind(), format!("{}: TEST UNIT READY: {e}", self.shown)))?;
        {
            let mut info = self.info.lock().unwrap_or_else(|p| p.into_inner());
            let mut g = granted(&s.params);
            g.remove("cmdsn_window");
            info.granted.extend(g);
        }
        Ok(Box::new(IscsiEngine { session: s, info: Arc::clone(&self.info), shown: self.shown.clone() }))
    }
    fn info(&self) -> ProtocolInfo {
        let mut info = self.info.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.spread.record(&mut info);
        info
    }
}

/// One worker's session as a disk engine.
struct IscsiEngine {
    session: Session,
    info: Arc<Mutex<ProtocolInfo>>,
    shown: String,
}

impl IscsiEngine {
    /// The error with the target's URL in front, so the one line names it.
    fn named(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", self.shown))
    }
}

impl IoEngine for IscsiEngine {
    fn buffer_mut(&mut self, index: u16) -> &mut [u8] {
        self.session.buffer_mut(index)
    }
    fn queue(&mut self, io: IoUnit) -> io::Result<()> {
        self.session.queue(io).map_err(|e| self.named(e))
    }
    fn commit(&mut self) -> io::Result<()> {
        self.session.commit().map_err(|e| self.named(e))
    }
    fn getevents(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        self.session.getevents(min, out).map_err(|e| self.named(e))
    }
}

impl Drop for IscsiEngine {
    fn drop(&mut self) {
        if let Some(capped) = self.session.window_capped {
            let mut info = self.info.lock().unwrap_or_else(|p| p.into_inner());
            let capped = capped.max(1);
            info.queue_depth_granted = Some(info.queue_depth_granted.map_or(capped, |q| q.min(capped)));
        }
    }
}

/// Fuzzing: `data` as a target's answers: set-up command data (REPORT
/// LUNS, READ CAPACITY, sense) and then as PDUs to a session
/// ([`session::fuzz_pdus`]).
#[cfg(feature = "fuzzing")]
pub fn fuzz_target(data: &[u8]) {
    let _ = (scsi::parse_report_luns(data), scsi::parse_capacity(data), scsi::parse_sense(data));
    let _ = describe_status(data.first().copied().unwrap_or(2), data);
    session::fuzz_pdus(data);
}

#[cfg(test)]
mod tests {
    use super::scsi::{parse_capacity, parse_report_luns};

    #[test]
    fn report_luns_and_capacity_parse_and_refuse_garbage() {
        let mut d = vec![0, 0, 0, 16, 0, 0, 0, 0];
        d.extend([0, 0, 0, 0, 0, 0, 0, 0]);
        d.extend([0, 1, 0, 0, 0, 0, 0, 0]);
        d.extend([0, 7, 0, 0, 0, 0, 0, 0]); // beyond the listed length
        assert_eq!(parse_report_luns(&d), vec![0, 1]);
        assert_eq!(parse_report_luns(&[0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 3]), Vec::<u16>::new());
        assert_eq!(parse_report_luns(&[1]), Vec::<u16>::new());
        let mut c = vec![0u8; 32];
        c[7] = 0xff; // last LBA 255
        c[10] = 0x02; // 512
        assert_eq!(parse_capacity(&c), Some((256, 512)));
        c[10] = 0x03; // 768: not a power of two
        assert_eq!(parse_capacity(&c), None);
        assert_eq!(parse_capacity(&c[..6]), None);
        // A last block whose capacity in bytes would wrap around 2^64.
        c[10] = 0x02;
        c[..8].copy_from_slice(&(1u64 << 60).to_be_bytes());
        assert_eq!(parse_capacity(&c), None);
        c[..8].copy_from_slice(&((1u64 << 55) - 1).to_be_bytes()); // exactly 2^64 bytes
        assert_eq!(parse_capacity(&c), None);
        c[..8].copy_from_slice(&((1u64 << 54) - 1).to_be_bytes());
        assert_eq!(parse_capacity(&c), Some((1 << 54, 512)));
    }
}
