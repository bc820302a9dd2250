//! Presenters of the single commands: what `disk`, `net`, `ping`, `link`, `flushcheck`,
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
pub mod fleet;
pub mod flushcheck;
pub mod link;
pub mod net;
pub mod ping;
pub mod soak;
pub mod sys;

/// `--goal` results of `disk` and `net`: the goals table, for under their own output.
pub fn goals(goals: &[headroom_analysis::GoalResult], style: crate::Style) -> String {
    crate::sections::goal_results_table(goals, style).map(|t| t.to_terminal(style.color)).unwrap_or_default()
}
