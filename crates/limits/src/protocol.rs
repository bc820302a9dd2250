//! What a storage protocol leaves of a TCP stream's goodput: the headers
//! each I/O carries on the stream its data travels (the reply for a read,
//! the request for a write). Requests for reads and replies for writes go
//! the other way, which a full-duplex link carries without slowing the data.
//!
//! Every figure is bytes on the TCP stream, derived from the protocol's
//! specification (sources per protocol below); none is measured.

use serde::Serialize;

/// The storage protocols headroom's clients speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageProtocol {
    /// NFSv3 (RFC 1813 over ONC RPC, RFC 5531).
    Nfs3,
    /// NFSv4.1 (RFC 8881): COMPOUND of SEQUENCE, PUTFH, READ/WRITE.
    Nfs4,
    /// iSCSI (RFC 7143), no header or data digests.
    Iscsi,
    /// NBD (the NBD protocol document, github.com/NetworkBlockDevice/nbd doc/proto.md).
    Nbd,
    /// SMB 2 and 3 (MS-SMB2), unsigned or signed (the signature lives in the
    /// header), not encrypted.
    Smb,
}

impl StorageProtocol {
    /// From the name users type: nfs (v3), nfs3, nfs4, iscsi, nbd, smb, cifs.
    pub fn parse(name: &str) -> Option<StorageProtocol> {
        match name.to_ascii_lowercase().as_str() {
            "nfs" | "nfs3" | "nfsv3" => Some(StorageProtocol::Nfs3),
            "nfs4" | "nfsv4" | "nfs4.1" => Some(StorageProtocol::Nfs4),
            "iscsi" => Some(StorageProtocol::Iscsi),
            "nbd" => Some(StorageProtocol::Nbd),
            "smb" | "smb2" | "smb3" | "cifs" => Some(StorageProtocol::Smb),
            _ => None,
        }
    }

    /// The name as headroom prints it.
    pub fn name(self) -> &'static str {
        match self {
            StorageProtocol::Nfs3 => "NFSv3",
            StorageProtocol::Nfs4 => "NFSv4.1",
            StorageProtocol::Iscsi => "iSCSI",
            StorageProtocol::Nbd => "NBD",
            StorageProtocol::Smb => "SMB",
        }
    }

    /// The largest data one request carries by default, bytes: a larger I/O
    /// becomes several requests (NFS rsize/wsize as Linux servers offer
    /// them, SMB MaxReadSize of Samba and Windows with large MTU, NBD's
    /// 32 MiB limit; iSCSI splits into PDUs instead, see `segment`).
    pub fn default_max_request(self) -> u64 {
        match self {
            StorageProtocol::Nfs3 | StorageProtocol::Nfs4 => 1 << 20,
            StorageProtocol::Smb => 8 << 20,
            StorageProtocol::Nbd => 32 << 20,
            StorageProtocol::Iscsi => u64::MAX,
        }
    }
}

/// Which way the data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DataDirection {
    /// Server to client.
    Read,
    /// Client to server.
    Write,
}

/// What the session negotiated, where it changes the overhead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// Largest data per request (NFS rsize/wsize, SMB MaxReadSize/MaxWriteSize).
    pub max_request: u64,
    /// iSCSI: data per PDU (the receiver's MaxRecvDataSegmentLength; 8192 by default).
    pub segment: u64,
}

impl Negotiated {
    /// The defaults of `protocol` (iSCSI segments of 8192 bytes, RFC 7143's default).
    pub fn defaults(protocol: StorageProtocol) -> Negotiated {
        Negotiated { max_request: protocol.default_max_request(), segment: 8192 }
    }
}

/// Header bytes on the data's stream for one request carrying `data` bytes.
fn header_bytes(protocol: StorageProtocol, direction: DataDirection, data: u64, n: &Negotiated) -> u64 {
    use DataDirection::{Read, Write};
    use StorageProtocol::*;
    match (protocol, direction) {
        // Structured reply chunk NBD_REPLY_TYPE_OFFSET_DATA: magic 4, flags 2,
        // type 2, handle 8, length 4, offset 8 (libnbd and nbdkit negotiate
        // structured replies). A write request: magic 4, flags 2, type 2,
        // handle 8, offset 8, length 4.
        (Nbd, Read) => 28,
        (Nbd, Write) => 28,
        // Record mark 4; RPC reply: xid, msg type, reply stat, verifier
        // (flavor, length), accept stat = 24; READ3resok: status 4,
        // post_op_attr 4 + fattr3 84, count 4, eof 4, opaque length 4 = 104.
        (Nfs3, Read) => 4 + 24 + 104,
        // Record mark 4; RPC call: xid, msg type, rpcvers, prog, vers, proc =
        // 24; AUTH_UNIX credential with a 16-byte machine name and no extra
        // groups: 8 + 4 + 20 + 4 + 4 + 4 = 44; null verifier 8; WRITE3args:
        // file handle 4 + 32 (Linux and Ganesha handles run 28-64), offset 8,
        // count 4, stable 4, opaque length 4 = 56.
        (Nfs3, Write) => 4 + 24 + 44 + 8 + 56,
        // Record mark 4, RPC reply 24, COMPOUND status 4, tag length 4,
        // result count 4; SEQUENCE result 8 + 36; PUTFH 8; READ op, status,
        // eof, length = 16.
        (Nfs4, Read) => 4 + 24 + 12 + 44 + 8 + 16,
        // Record mark 4, RPC call with AUTH_SYS 24 + 44 + 8, COMPOUND tag,
        // minor version, count 12; SEQUENCE 4 + 32; PUTFH 4 + 4 + 32; WRITE
        // op 4, stateid 16, offset 8, stable 4, length 4.
        (Nfs4, Write) => 4 + 76 + 12 + 36 + 40 + 36,
        // One 48-byte Basic Header Segment per Data-In PDU of at most
        // `segment` bytes, and a 48-byte SCSI Response (RFC 7143 11.4, 11.7).
        (Iscsi, Read) => ISCSI_BHS * data.div_ceil(n.segment.max(1)) + ISCSI_BHS,
        // The SCSI Command PDU and one Data-Out PDU header per segment.
        (Iscsi, Write) => ISCSI_BHS + ISCSI_BHS * data.div_ceil(n.segment.max(1)),
        // NetBIOS session header 4, SMB2 header 64, READ response 16 (the data
        // starts at DataOffset 0x50 from the SMB2 header).
        (Smb, Read) => 4 + 64 + 16,
        // NetBIOS 4, SMB2 header 64, WRITE request 48.
        (Smb, Write) => 4 + 64 + 48,
    }
}

/// iSCSI's Basic Header Segment, bytes.
const ISCSI_BHS: u64 = 48;

/// Header bytes on the data's stream for one I/O of `io_size` (split into
/// requests of at most `n.max_request`).
pub fn headers_per_io(protocol: StorageProtocol, direction: DataDirection, io_size: u64, n: &Negotiated) -> u64 {
    let per_request = n.max_request.max(1).min(io_size.max(1));
    let full = io_size / per_request;
    let rest = io_size % per_request;
    let mut headers = full * header_bytes(protocol, direction, per_request, n);
    if rest > 0 {
        headers += header_bytes(protocol, direction, rest, n);
    }
    headers
}

/// Requests one I/O of `io_size` takes.
pub fn requests_per_io(io_size: u64, n: &Negotiated) -> u64 {
    io_size.div_ceil(n.max_request.max(1)).max(1)
}

/// The share of a stream's bytes that is data, for I/Os of `io_size`.
pub fn efficiency(protocol: StorageProtocol, direction: DataDirection, io_size: u64, n: &Negotiated) -> f64 {
    if io_size == 0 {
        return 0.0;
    }
    io_size as f64 / (io_size + headers_per_io(protocol, direction, io_size, n)) as f64
}

/// The protocol's data goodput over a TCP stream of `tcp_goodput_bits`, bits/s.
pub fn goodput_bits(
    tcp_goodput_bits: f64,
    protocol: StorageProtocol,
    direction: DataDirection,
    io_size: u64,
    n: &Negotiated,
) -> f64 {
    tcp_goodput_bits * efficiency(protocol, direction, io_size, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eff(p: StorageProtocol, d: DataDirection, io: u64) -> f64 {
        efficiency(p, d, io, &Negotiated::defaults(p))
    }

    #[test]
    fn large_ios_lose_little_small_ones_lose_much() {
        for p in [StorageProtocol::Nfs3, StorageProtocol::Nfs4, StorageProtocol::Nbd, StorageProtocol::Smb] {
            assert!(eff(p, DataDirection::Read, 1 << 20) > 0.9998, "{p:?}");
            assert!(eff(p, DataDirection::Read, 4096) < 0.995, "{p:?}");
        }
        // NBD 1M read: 1048576 / (1048576 + 28).
        assert!((eff(StorageProtocol::Nbd, DataDirection::Read, 1 << 20) - 1048576.0 / 1048604.0).abs() < 1e-12);
        // NFSv3 4K read: 4096 / (4096 + 132) = 96.9%.
        assert!((eff(StorageProtocol::Nfs3, DataDirection::Read, 4096) - 4096.0 / 4228.0).abs() < 1e-12);
    }

    #[test]
    fn iscsi_pays_a_header_per_segment() {
        // 1 MiB in 8 KiB Data-In PDUs: 128 BHS + the response = 129 x 48 bytes.
        let e = eff(StorageProtocol::Iscsi, DataDirection::Read, 1 << 20);
        assert!((e - 1048576.0 / (1048576.0 + 129.0 * 48.0)).abs() < 1e-12);
        let big = efficiency(
            StorageProtocol::Iscsi,
            DataDirection::Read,
            1 << 20,
            &Negotiated { max_request: u64::MAX, segment: 262_144 },
        );
        assert!(big > e, "larger segments, fewer headers");
    }

    #[test]
    fn requests_larger_than_the_servers_limit_are_split() {
        let n = Negotiated { max_request: 65536, segment: 8192 };
        let split = efficiency(StorageProtocol::Nfs3, DataDirection::Read, 1 << 20, &n);
        assert!((split - 1048576.0 / (1048576.0 + 16.0 * 132.0)).abs() < 1e-12);
        assert_eq!(StorageProtocol::parse("CIFS"), Some(StorageProtocol::Smb));
        assert_eq!(StorageProtocol::parse("ftp"), None);
    }
}
