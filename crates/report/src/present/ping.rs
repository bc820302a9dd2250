//! `headroom ping` on a terminal.
