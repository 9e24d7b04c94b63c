//! Running the broker and its tools as an operator does: the admin CLI (`cli_run` runs it),
//! the command line and config file, restarts and recovery, log compaction, shutdown under load, a full disk,
//! `ringbroker tune`, and the load tool.
//!
//! `tune` reads this test process's own resource limits: no test here may change them.

mod cli;
mod cli_run;
mod cli_security;
mod cluster;
mod compaction;
mod faults;
mod layers;
mod ringbench;
mod shutdown;
mod startup;
mod tune;
