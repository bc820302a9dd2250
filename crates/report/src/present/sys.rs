//! `headroom sys` on a terminal.
