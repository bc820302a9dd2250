//! `headroom link` on a terminal.
