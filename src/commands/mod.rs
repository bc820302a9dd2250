//! One file per subcommand: each turns parsed arguments into Runner and
//! analysis calls and hands the document to a presenter. `main` dispatches
//! to them; they never reach back into the command-line definition.

pub mod compare;
pub mod cpu;
pub mod disk;
pub mod fleet;
pub mod flushcheck;
pub mod link;
pub mod meta;
pub mod net;
pub mod ping;
pub mod remote;
pub mod report;
pub mod run;
pub mod serve;
pub mod soak;
pub mod sys;
