//! x
#![deny(missing_docs)]
pub mod bench;
pub mod cache;
pub mod client;
pub mod disk;
pub mod error;
pub mod fuse;
pub mod index;
pub mod manifest;
pub mod membership;
pub mod metrics;
pub mod node;
pub mod overlay;
pub mod peers;
pub mod proto;
pub mod server;
mod sys;
