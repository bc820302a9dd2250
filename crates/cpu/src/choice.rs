//! The user's choice of kernels, threads, buffer and time, resolved against
//! this machine into a [`KernelMatrix`], with the ranges every caller (the
//! `cpu` command, `run`'s CPU hop) enforces the same way. Errors name a
//! [`Setting`]; the front end spells it (the binary's flags), never this crate.

use crate::{all_kernels, BufferSpec, Group, Kernel, KernelMatrix, CACHE_BUFFER, MIN_BUFFER};
use headroom_units::setting::Message;
use headroom_units::{format_duration, format_size, Size};
use std::fmt;
use std::time::Duration;

/// What the user chooses of a CPU measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// Kernel groups or ids.
    Kernels,
    /// Threads per figure.
    Threads,
    /// The out-of-cache buffer.
    Size,
    /// Measured time of each figure.
    Time,
}

impl Setting {
    /// The setting's own name, for a front end that gives none.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Kernels => "kernels",
            Setting::Threads => "threads",
            Setting::Size => "buffer size",
            Setting::Time => "time",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A choice outside what the machine or the kernels allow; the message names
/// the setting, the accepted range and an example.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BadChoice(pub Message<Setting>);

macro_rules! refuse {
    ($message:expr) => {
        return Err(BadChoice($message))
    };
}

/// What the user asked for, as the flags give it.
#[derive(Debug, Clone, Default)]
pub struct CpuChoice {
    /// Kernel groups or ids (`--kernels`); empty: all.
    pub kernels: Vec<String>,
    /// `--threads`: 1, all or a number; None: 1 and all.
    pub threads: Option<String>,
    /// `--size`: the out-of-cache buffer; None: the default.
    pub size: Option<Size>,
    /// `--time`: measured time of each figure.
    pub time: Duration,
}

impl CpuChoice {
    /// The matrix to measure on a machine with `usable` CPUs and `ram` bytes.
    pub fn resolve(&self, usable: usize, ram: Option<u64>) -> Result<KernelMatrix, BadChoice> {
        let threads = thread_counts(self.threads.as_deref(), usable)?;
        let buffers = buffers(self.size, ram)?;
        let time = check_time(self.time)?;
        Ok(KernelMatrix {
            kernels: select_kernels(&self.kernels)?,
            threads,
            buffers,
            time,
            warmup: (time / 4).clamp(Duration::from_millis(2), Duration::from_millis(50)),
        })
    }
}

/// The kernels `--kernels` names (all when empty).
pub fn select_kernels(names: &[String]) -> Result<Vec<Kernel>, BadChoice> {
    let all = all_kernels();
    if names.is_empty() {
        return Ok(all);
    }
    let group_of = |name: &str| match name {
        "parity" | "raid" => Some(Group::Parity),
        "checksum" | "checksums" | "hash" => Some(Group::Checksum),
        "compression" | "compress" => Some(Group::Compression),
        "encryption" | "crypto" | "aead" => Some(Group::Encryption),
        _ => None,
    };
    let mut chosen = Vec::new();
    for name in names {
        let name = name.trim().to_ascii_lowercase();
        let matched: Vec<Kernel> = match group_of(&name) {
            Some(g) => all.iter().filter(|k| k.group() == g).copied().collect(),
            None => all.iter().filter(|k| k.id() == name).copied().collect(),
        };
        if matched.is_empty() {
            // A kernel runs on several kinds of data: name each id once, in the catalog's order.
            let mut ids: Vec<String> = Vec::new();
            for id in all.iter().map(|k| k.id()) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            refuse!(Message::of(Setting::Kernels).then(format!(
                ": unknown kernel '{name}'; accepted: parity, checksum, compression, encryption or one of {}",
                ids.join(", ")
            )));
        }
        chosen.extend(matched);
    }
    // Keep the catalog's order and drop repeats.
    Ok(all.into_iter().filter(|k| chosen.contains(k)).collect())
}

pub(crate) const TIME_RANGE: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(60));

/// `--threads` resolved against this machine.
fn thread_counts(arg: Option<&str>, usable: usize) -> Result<Vec<usize>, BadChoice> {
    let range = Message::text(format!("1 to {usable} (this machine's usable CPUs) or all, e.g. "))
        .and(Setting::Threads)
        .then(" 1");
    let Some(text) = arg else {
        return Ok(if usable > 1 { vec![1, usable] } else { vec![1] });
    };
    if text.eq_ignore_ascii_case("all") {
        return Ok(vec![usable]);
    }
    match text.parse::<usize>() {
        Ok(n) if (1..=usable).contains(&n) => Ok(vec![n]),
        Ok(n) => refuse!(Message::of(Setting::Threads).then(format!(" {n} is out of range: ")).join(range)),
        Err(_) => refuse!(Message::of(Setting::Threads).then(format!(" '{text}' is not a number: ")).join(range)),
    }
}

/// The buffer columns: out of cache (`size`) and cache-resident (256 KiB per thread).
fn buffers(size: Option<Size>, ram: Option<u64>) -> Result<Vec<BufferSpec>, BadChoice> {
    let max = ram.map(|r| r / 2);
    let range = match max {
        Some(m) => Message::text(format!("4 KiB to {} (half the RAM), e.g. ", format_size(m))),
        None => Message::text("at least 4 KiB, e.g. "),
    }
    .and(Setting::Size)
    .then(" 64M");
    let bytes = match size {
        Some(Size(b)) => {
            if b < MIN_BUFFER || max.is_some_and(|m| b > m) {
                refuse!(Message::of(Setting::Size).then(format!(" {} is out of range: ", format_size(b))).join(range));
            }
            b
        }
        None => {
            let default = crate::default_memory_buffer();
            max.map_or(default, |m| default.min(m))
        }
    };
    Ok(if bytes > CACHE_BUFFER {
        vec![BufferSpec { bytes, cache_resident: false }, BufferSpec { bytes: CACHE_BUFFER, cache_resident: true }]
    } else {
        vec![BufferSpec { bytes, cache_resident: true }]
    })
}

fn check_time(time: Duration) -> Result<Duration, BadChoice> {
    if time < TIME_RANGE.0 || time > TIME_RANGE.1 {
        refuse!(Message::of(Setting::Time)
            .then(format!(
                " {} is out of range: {} to {} per figure, e.g. ",
                format_duration(time),
                format_duration(TIME_RANGE.0),
                format_duration(TIME_RANGE.1)
            ))
            .and(Setting::Time)
            .then(" 100ms"));
    }
    Ok(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_select_by_group_or_id_in_catalog_order() {
        let names = |list: &[&str]| {
            let owned: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            select_kernels(&owned).map(|ks| ks.iter().map(|k| k.id()).collect::<Vec<_>>())
        };
        assert_eq!(names(&["aes-256-gcm", "sha256"]).unwrap(), ["sha256", "aes-256-gcm"]);
        assert_eq!(
            names(&["encryption"]).unwrap(),
            ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305", "aes-128-ccm", "aes-256-ccm"]
        );
        assert_eq!(names(&["zstd-3-compress"]).unwrap().len(), 2, "both data kinds");
        assert_eq!(names(&[]).unwrap().len(), all_kernels().len());
        let err = names(&["md5"]).unwrap_err().to_string();
        assert!(err.contains("unknown kernel 'md5'") && err.contains("aes-256-gcm"), "{err}");
        assert_eq!(err.matches("lz4-compress").count(), 1, "each kernel named once: {err}");
    }

    #[test]
    fn threads_accept_one_all_and_numbers_in_range() {
        assert_eq!(thread_counts(None, 8).unwrap(), [1, 8]);
        assert_eq!(thread_counts(None, 1).unwrap(), [1]);
        assert_eq!(thread_counts(Some("all"), 8).unwrap(), [8]);
        assert_eq!(thread_counts(Some("3"), 8).unwrap(), [3]);
        let err = thread_counts(Some("0"), 8).unwrap_err().0;
        assert_eq!(err.settings().next(), Some(Setting::Threads), "{err}");
        assert!(err.to_string().contains("threads 0 is out of range: 1 to 8"), "{err}");
        assert!(thread_counts(Some("9"), 8).is_err());
        assert!(thread_counts(Some("many"), 8).is_err());
    }

    #[test]
    fn sizes_outside_4k_to_half_the_ram_are_refused() {
        let ram = Some(8u64 << 30);
        assert!(buffers(Some(Size(4095)), ram).unwrap_err().to_string().contains("4 KiB to 4.000 GiB"));
        assert!(buffers(Some(Size((4 << 30) + 1)), ram).is_err());
        let b = buffers(Some(Size(1 << 20)), ram).unwrap();
        assert_eq!(b.len(), 2);
        assert!(!b[0].cache_resident && b[1].cache_resident);
        let small = buffers(Some(Size(64 << 10)), ram).unwrap();
        assert_eq!(small, [BufferSpec { bytes: 64 << 10, cache_resident: true }]);
    }
}
