//! The documents `flushcheck write` and `flushcheck verify` print with
//! `--json`: they live in headroom-result (presenters read them from there);
//! re-exported so the engine's callers keep one path.

pub use headroom_result::flushcheck::{BlockFinding, Finding, VerifyReport, WriteReport, SCHEMA};
