//! `headroom disk` on a terminal.
