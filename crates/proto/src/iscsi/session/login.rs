//! Logging in (RFC 7143 6 and 13): connecting, the security phase (CHAP)
//! when credentials are given, the operational negotiation, and what it
//! settled ([`Params`]). The login PDUs travel through the session's
//! connection (`crate::frame`), each answer whole within the login's deadline.
//!
//! What it owns: the login keys headroom offers and accepts, and why a login
//! failed ([`LoginError`]). What it must not do: send SCSI commands or
//! touch the CmdSN pipeline beyond the window login opens.

use super::super::pdu::{self, at, flag, op, stage, Header, Out, WireError, BHS};
use super::{Session, OUR_MAX_RECV, SILENCE};
use crate::transport;
use crate::ProtoError;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connecting and logging in.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest burst the protocol allows (2^24 - 1, rounded down to 1 KiB as initiators offer it).
const OUR_MAX_BURST: u32 = crate::iscsi_keys::MAX_BURST;
/// Login PDUs carry at most this much text (RFC 7143 6.1: 8192 during login).
pub(super) const LOGIN_TEXT_MAX: usize = 65_536;

/// This initiator's name.
pub const INITIATOR_NAME: &str = "iqn.2026-11.dev.headroom:initiator";

static SESSIONS: AtomicU32 = AtomicU32::new(0);

/// What login settled (RFC 7143 13: the keys headroom uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// The target's MaxRecvDataSegmentLength: the most data per PDU headroom sends.
    pub target_max_recv: u32,
    /// Headroom's MaxRecvDataSegmentLength: the most data per PDU the target sends.
    pub initiator_max_recv: u32,
    /// MaxBurstLength.
    pub max_burst: u32,
    /// FirstBurstLength: unsolicited data per write.
    pub first_burst: u32,
    /// ImmediateData.
    pub immediate_data: bool,
    /// InitialR2T.
    pub initial_r2t: bool,
    /// MaxOutstandingR2T.
    pub max_outstanding_r2t: u32,
    /// DataPDUInOrder.
    pub data_pdu_in_order: bool,
    /// DataSequenceInOrder.
    pub data_sequence_in_order: bool,
    /// MaxCmdSN - ExpCmdSN + 1 at the end of login.
    pub cmdsn_window: u32,
}

impl Default for Params {
    /// RFC 7143's defaults, for keys a target leaves out.
    fn default() -> Self {
        Params {
            target_max_recv: 8192,
            initiator_max_recv: OUR_MAX_RECV,
            max_burst: 262_144,
            first_burst: 65_536,
            immediate_data: true,
            initial_r2t: true,
            max_outstanding_r2t: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
            cmdsn_window: 1,
        }
    }
}

/// Who to log in to and as whom.
#[derive(Clone)]
pub struct LoginSpec {
    /// HOST:PORT.
    pub addr: String,
    /// Target name.
    pub target: String,
    /// CHAP user and secret.
    pub chap: Option<(String, String)>,
    /// LUN every command addresses.
    pub lun: u16,
    /// Ctrl-C: every wait ends at once.
    pub stop: Arc<AtomicBool>,
    /// Where the connection leaves from (`--bind`, `--interface`).
    pub source: headroom_net::Source,
    /// Login keys the user chose to offer instead of headroom's (`--iscsi`).
    pub keys: crate::iscsi_keys::IscsiKeys,
}

impl LoginSpec {
    /// The receive segment offered: the one asked with `--iscsi` (checked to
    /// be 512 to 16776192 when it was parsed), else headroom's.
    fn max_recv(&self) -> u32 {
        self.keys.get("MaxRecvDataSegmentLength").and_then(|v| v.parse().ok()).unwrap_or(OUR_MAX_RECV)
    }
}

/// Why login failed, to be told apart by the caller.
#[derive(Debug)]
pub enum LoginError {
    /// The target answered with a status (class, detail).
    Status(u8, u8),
    /// Anything else; the message says what, the variant whose fault.
    Other(ProtoError),
}

impl From<io::Error> for LoginError {
    fn from(e: io::Error) -> Self {
        LoginError::Other(ProtoError::io(&e))
    }
}

impl From<WireError> for LoginError {
    fn from(e: WireError) -> Self {
        LoginError::Other(ProtoError::Protocol(format!("garbage from the target: {e}")))
    }
}

impl Session {
    /// Connects and logs in; `depth` buffers of `buf_size` bytes for I/O.
    pub fn login(spec: &LoginSpec, depth: usize, buf_size: usize) -> Result<Session, LoginError> {
        let addrs = transport::resolve(&spec.addr)
            .map_err(|e| LoginError::Other(ProtoError::Unreachable(format!("cannot resolve {}: {e}", spec.addr))))?;
        let sock = transport::connect(&addrs, &spec.source, LOGIN_TIMEOUT, &spec.stop).map_err(|e| {
            LoginError::Other(ProtoError::of_kind(e.kind(), format!("cannot connect to {}: {e}", spec.addr)))
        })?;
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        let mut s = Session::fresh(sock, Arc::clone(&spec.stop), spec.lun, (depth, buf_size), spec.max_recv());
        s.negotiate(spec)?;
        Ok(s)
    }

    /// Login phases: security (CHAP) when credentials are given, then operational.
    fn negotiate(&mut self, spec: &LoginSpec) -> Result<(), LoginError> {
        let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
        // ISID of the "random" type (RFC 7143 10.12.5): unique per session of this process.
        let pid = std::process::id();
        let isid: [u8; 6] = [pdu::ISID_RANDOM, (pid >> 16) as u8, (pid >> 8) as u8, pid as u8, (n >> 8) as u8, n as u8];
        let itt = 0u32;
        let mut current = if spec.chap.is_some() { stage::SECURITY } else { stage::OPERATIONAL };
        let mut keys: Vec<(&str, String)> = vec![
            ("InitiatorName", INITIATOR_NAME.into()),
            ("SessionType", "Normal".into()),
            ("TargetName", spec.target.clone()),
        ];
        let operational = operational_keys(&spec.keys);
        if current == stage::SECURITY {
            keys.push(("AuthMethod", "CHAP,None".into()));
        } else {
            keys.extend(operational.iter().cloned());
        }
        let mut transit = current == stage::OPERATIONAL;
        let mut chap_sent = false;
        let mut got: Vec<(String, String)> = Vec::new();
        let deadline = Instant::now() + SILENCE;
        for _round in 0..16 {
            let next = if current == stage::SECURITY { stage::OPERATIONAL } else { stage::FULL_FEATURE };
            let text = pdu::build_text(&keys);
            let out = Out::new(op::LOGIN, true, stage::flags(transit, current, next))
                .data_len(text.len())
                .word(at::ITT, itt)
                .word(at::CMD_SN, self.cmd_sn)
                .word(at::EXP_STAT_SN, self.exp_stat_sn);
            let mut bhs = out.bhs;
            bhs[8..14].copy_from_slice(&isid);
            self.push(&bhs, &text);
            let (h, data) = self.recv_login(deadline)?;
            let (class, detail) = h.login_status();
            if class != 0 {
                return Err(LoginError::Status(class, detail));
            }
            let pairs = pdu::parse_text(&data)?;
            let continued = h.flags & flag::CONTINUE != 0;
            got.extend(pairs.iter().cloned());
            if continued {
                // The target has more text: ask for it with an empty request.
                keys.clear();
                transit = false;
                continue;
            }
            let target_transit = h.flags & flag::TRANSIT != 0;
            let target_next = h.flags & flag::NEXT_STAGE;
            if current == stage::SECURITY {
                let find = |k: &str| got.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.clone());
                if target_transit && target_next == stage::OPERATIONAL {
                    current = stage::OPERATIONAL;
                    keys = operational.clone();
                    transit = true;
                    got.clear();
                    continue;
                }
                match find("AuthMethod").as_deref() {
                    Some("CHAP") if !chap_sent => {
                        if let (Some(id), Some(challenge)) = (find("CHAP_I"), find("CHAP_C")) {
                            let id: u8 = id
                                .parse()
                                .map_err(|_| LoginError::Other(ProtoError::Protocol(format!("bad CHAP_I '{id}'"))))?;
                            let challenge = pdu::hex_value(&challenge)?;
                            let (user, secret) = spec.chap.clone().unwrap_or_default();
                            keys = vec![
                                ("CHAP_N", user),
                                ("CHAP_R", pdu::chap_response(id, secret.as_bytes(), &challenge)),
                            ];
                            transit = true;
                            chap_sent = true;
                        } else {
                            keys = vec![("CHAP_A", "5".into())];
                            transit = false;
                        }
                    }
                    Some("CHAP") => {
                        keys.clear();
                        transit = true;
                    }
                    Some("None") => {
                        keys.clear();
                        transit = true;
                    }
                    Some(other) => {
                        return Err(LoginError::Other(ProtoError::Auth(format!(
                            "the target wants authentication '{other}'"
                        ))));
                    }
                    None => {
                        keys.clear();
                        transit = true;
                    }
                }
                continue;
            }
            if target_transit && target_next == stage::FULL_FEATURE {
                self.apply(&got)?;
                // The receive segment offered is what the target may send.
                self.params.initiator_max_recv = spec.max_recv();
                self.exp_cmd_sn = h.exp_cmd_sn;
                self.max_cmd_sn = h.max_cmd_sn;
                self.cmd_sn = h.exp_cmd_sn;
                self.params.cmdsn_window = self.window();
                return Ok(());
            }
            // The target negotiates further: accept what it proposed and ask to move on.
            keys = answer_unoffered(&got, &operational);
            transit = true;
        }
        Err(LoginError::Other(ProtoError::Protocol("login did not finish after 16 exchanges".into())))
    }

    pub(super) fn apply(&mut self, got: &[(String, String)]) -> Result<(), LoginError> {
        let p = &mut self.params;
        for (k, v) in got {
            let num = || pdu::number(v).filter(|&n| n > 0 && n < 1 << 24).map(|n| n as u32);
            let yes = v == "Yes";
            match k.as_str() {
                "MaxRecvDataSegmentLength" => p.target_max_recv = num().unwrap_or(p.target_max_recv).max(512),
                "MaxBurstLength" => p.max_burst = num().unwrap_or(p.max_burst).max(512),
                "FirstBurstLength" => p.first_burst = num().unwrap_or(p.first_burst).max(512),
                "MaxOutstandingR2T" => p.max_outstanding_r2t = num().unwrap_or(p.max_outstanding_r2t),
                "ImmediateData" => p.immediate_data = yes,
                "InitialR2T" => p.initial_r2t = yes,
                "DataPDUInOrder" => p.data_pdu_in_order = yes,
                "DataSequenceInOrder" => p.data_sequence_in_order = yes,
                "HeaderDigest" | "DataDigest" if v != "None" => {
                    return Err(LoginError::Other(ProtoError::Usage(format!(
                        "the target insists on {k}={v}; headroom sends none"
                    ))))
                }
                _ => {}
            }
        }
        p.first_burst = p.first_burst.min(p.max_burst);
        Ok(())
    }

    /// The target's next login PDU, whole, by `deadline`.
    fn recv_login(&mut self, deadline: Instant) -> Result<(Header, Vec<u8>), LoginError> {
        let (h, frame) =
            self.conn.recv(deadline, BHS, |head| pdu::frame(head, LOGIN_TEXT_MAX).map_err(LoginError::from))?;
        match h.opcode {
            op::LOGIN_RESP => {
                self.exp_stat_sn = h.stat_sn.wrapping_add(1);
                Ok((h, self.conn.bytes(frame)[BHS + h.ahs_len..][..h.data_len].to_vec()))
            }
            op::REJECT => Err(LoginError::Other(ProtoError::Usage(format!(
                "the target rejected the login (reason 0x{:02x})",
                h.byte2
            )))),
            other => Err(LoginError::Other(ProtoError::Protocol(format!(
                "garbage from the target: opcode 0x{other:02x} during login"
            )))),
        }
    }
}

/// The operational keys headroom offers, with the user's choices in place of its own.
pub(super) fn operational_keys(chosen: &crate::iscsi_keys::IscsiKeys) -> Vec<(&'static str, String)> {
    let mut keys = vec![
        ("HeaderDigest", "None".into()),
        ("DataDigest", "None".into()),
        ("MaxConnections", "1".into()),
        ("InitialR2T", "No".into()),
        ("ImmediateData", "Yes".into()),
        ("MaxRecvDataSegmentLength", OUR_MAX_RECV.to_string()),
        ("MaxBurstLength", OUR_MAX_BURST.to_string()),
        ("FirstBurstLength", OUR_MAX_RECV.to_string()),
        ("DefaultTime2Wait", "0".into()),
        ("DefaultTime2Retain", "0".into()),
        ("MaxOutstandingR2T", "8".into()),
        ("DataPDUInOrder", "Yes".into()),
        ("DataSequenceInOrder", "Yes".into()),
        ("ErrorRecoveryLevel", "0".into()),
    ];
    for (key, value) in keys.iter_mut() {
        if let Some(v) = chosen.get(key) {
            *value = v.to_string();
        }
    }
    keys
}

/// Keys the target proposed that headroom did not offer, accepted as proposed
/// (RFC 7143 6.2: every key offered needs an answer).
pub(super) fn answer_unoffered(
    got: &[(String, String)],
    offered: &[(&'static str, String)],
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (k, v) in got {
        if offered.iter().any(|(o, _)| o == k) || k == "TargetPortalGroupTag" || k == "TargetAlias" {
            continue;
        }
        // Leak-free: answer only the keys RFC 7143 defines, by their static names.
        if let Some(name) = KNOWN_KEYS.iter().find(|n| **n == k.as_str()) {
            out.push((*name, v.clone()));
        }
    }
    out
}

const KNOWN_KEYS: [&str; 6] = ["IFMarker", "OFMarker", "IFMarkInt", "OFMarkInt", "TaskReporting", "iSCSIProtocolLevel"];
