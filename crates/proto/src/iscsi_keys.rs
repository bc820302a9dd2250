//! The login keys a user may choose for the initiator to offer
//! (`--iscsi KEY=VALUE,...`): the burst and R2T keys storage engineers tune,
//! checked against RFC 7143's ranges and this initiator's buffers before
//! anything connects. What the target granted is recorded beside them.
//!
//! What it owns: which keys may be set, their ranges, the text form. What it
//! must not do: negotiate (login does) or send anything.

use headroom_disk::{DiskError, Setting};
use headroom_units::setting::Message;
use std::fmt;
use std::str::FromStr;

/// The largest burst RFC 7143 allows (2^24 - 1), rounded down to 1 KiB as initiators offer it.
pub(crate) const MAX_BURST: u32 = 16_776_192;
/// The receive segment this initiator offers unless asked otherwise: what
/// open-iscsi, libiscsi and Windows' initiator offer, so a figure is what
/// they would see.
pub(crate) const MAX_RECV_SEGMENT: u32 = 262_144;

/// A key a user may set, and the values it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    YesNo,
    /// Inclusive range.
    Number(u32, u32),
}

/// The keys, with their kind. The initiator's own MaxRecvDataSegmentLength
/// may be asked up to RFC 7143's largest segment; the session sizes its
/// receive buffer for it.
const SETTABLE: [(&str, Kind); 6] = [
    ("InitialR2T", Kind::YesNo),
    ("ImmediateData", Kind::YesNo),
    ("MaxBurstLength", Kind::Number(512, MAX_BURST)),
    ("FirstBurstLength", Kind::Number(512, MAX_BURST)),
    ("MaxOutstandingR2T", Kind::Number(1, 65_535)),
    ("MaxRecvDataSegmentLength", Kind::Number(512, MAX_BURST)),
];

/// The login keys to offer instead of headroom's own choice, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IscsiKeys(Vec<(&'static str, String)>);

impl IscsiKeys {
    /// The value asked for `key`, if any.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    /// Every key asked, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.0.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// Whether no key was asked.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `other`'s keys after this one's (a repeated flag): a key given twice keeps its last value.
    pub fn merged(mut self, other: IscsiKeys) -> IscsiKeys {
        for (k, v) in other.0 {
            self.0.retain(|(old, _)| *old != k);
            self.0.push((k, v));
        }
        self
    }

    /// The keys as the result records them: `NAME_asked`, Yes/No as 1/0.
    pub(crate) fn asked_numbers(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.0.iter().map(|(k, v)| {
            let n = match v.as_str() {
                "Yes" => 1,
                "No" => 0,
                number => number.parse().unwrap_or_default(),
            };
            (format!("{k}_asked"), n)
        })
    }
}

impl fmt::Display for IscsiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&pairs.join(","))
    }
}

impl FromStr for IscsiKeys {
    type Err = DiskError;

    /// `KEY=VALUE[,KEY=VALUE...]`, keys as RFC 7143 spells them (case-insensitive here).
    fn from_str(text: &str) -> Result<IscsiKeys, DiskError> {
        parse(text).map_err(DiskError::Invalid)
    }
}

/// "e.g. `--iscsi` MaxOutstandingR2T=1,...", the setting named for the front end to spell.
fn example() -> Message<Setting> {
    Message::text("e.g. ").and(Setting::IscsiKeys).then(" MaxOutstandingR2T=1,InitialR2T=Yes,FirstBurstLength=65536")
}

/// [`IscsiKeys::from_str`]: the keys, or why not.
fn parse(text: &str) -> Result<IscsiKeys, Message<Setting>> {
    let names: Vec<&str> = SETTABLE.iter().map(|(k, _)| *k).collect();
    let mut keys = IscsiKeys::default();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| Message::text(format!("'{pair}' is not KEY=VALUE (")).join(example()).then(")"))?;
        let (key, kind) = SETTABLE.iter().find(|(k, _)| k.eq_ignore_ascii_case(name.trim())).ok_or_else(|| {
            Message::text(format!("'{}' is not a login key headroom offers; one of {}", name.trim(), names.join(", ")))
        })?;
        let value = value.trim();
        let value = match kind {
            Kind::YesNo => match value.to_ascii_lowercase().as_str() {
                "yes" => "Yes".to_string(),
                "no" => "No".to_string(),
                _ => return Err(Message::text(format!("{key}={value}: it is Yes or No"))),
            },
            Kind::Number(lo, hi) => {
                let n: u32 = value.parse().map_err(|_| {
                    Message::text(format!("{key}={value}: a number of bytes or R2Ts is expected ("))
                        .join(example())
                        .then(")")
                })?;
                if !(*lo..=*hi).contains(&n) {
                    return Err(Message::text(format!("{key}={n} is out of range: {lo} to {hi}")));
                }
                n.to_string()
            }
        };
        keys = keys.merged(IscsiKeys(vec![(key, value)]));
    }
    if keys.is_empty() {
        return Err(Message::text("no key given (").join(example()).then(")"));
    }
    keys.check_bursts().map_err(Message::text)?;
    Ok(keys)
}

impl IscsiKeys {
    /// RFC 7143 13.14: FirstBurstLength must not exceed MaxBurstLength.
    fn check_bursts(&self) -> Result<(), String> {
        let number = |k: &str| self.get(k).and_then(|v| v.parse::<u32>().ok());
        if let (Some(first), Some(max)) = (number("FirstBurstLength"), number("MaxBurstLength")) {
            if first > max {
                return Err(format!("FirstBurstLength={first} exceeds MaxBurstLength={max} (RFC 7143 13.14)"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_and_spelled_as_the_rfc_does() {
        let k: IscsiKeys = "maxoutstandingr2t=1, initialr2t=yes,FirstBurstLength=65536".parse().unwrap();
        assert_eq!(k.to_string(), "MaxOutstandingR2T=1,InitialR2T=Yes,FirstBurstLength=65536");
        let asked: Vec<(String, u64)> = k.asked_numbers().collect();
        assert_eq!(asked[1], ("InitialR2T_asked".to_string(), 1));
        for (bad, says) in [
            ("HeaderDigest=CRC32C", "not a login key headroom offers"),
            ("InitialR2T=maybe", "Yes or No"),
            ("MaxOutstandingR2T=0", "out of range: 1 to 65535"),
            ("MaxRecvDataSegmentLength=16777216", "out of range: 512 to 16776192"),
            ("FirstBurstLength=1048576,MaxBurstLength=65536", "exceeds MaxBurstLength"),
            ("InitialR2T", "not KEY=VALUE"),
            ("", "no key given"),
        ] {
            let e = bad.parse::<IscsiKeys>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(
            "MaxRecvDataSegmentLength=1048576".parse::<IscsiKeys>().is_ok(),
            "above headroom's 262144, within RFC 7143's"
        );
        let merged = k.merged("MaxOutstandingR2T=4".parse().unwrap());
        assert_eq!(merged.get("MaxOutstandingR2T"), Some("4"));
    }
}
