//! The append-only log: record format, segment files, appending and sequential reading.

pub mod ahead;
pub mod format;
pub mod reader;
pub mod segment;
pub mod writer;
