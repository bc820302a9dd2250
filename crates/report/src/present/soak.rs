//! `headroom soak` on a terminal.
