//! `headroom cpu` on a terminal.
