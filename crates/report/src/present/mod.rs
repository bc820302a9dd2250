//! Presenters of the single commands: what `disk`, `net`, `ping`, `link`,
//! `cpu`, `sys` and `soak` print on a terminal, built from the result
//! document (or the inventory / link model the command shows) and a
//! [`Style`](crate::Style). Each file owns one command's layout; they share
//! the formatters of `headroom-units` and the tables of `table.rs`.
//! Like the rest of this crate they do no I/O and no analysis: the caller
//! prints the returned text, and every judgement they show (a ceiling, a
//! cliff, a warning) was made by `headroom-analysis` before.

pub mod compare;
pub mod cpu;
pub mod disk;
pub mod link;
pub mod net;
pub mod ping;
pub mod soak;
pub mod sys;
