//! `headroom net` on a terminal.
