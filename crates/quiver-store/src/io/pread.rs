//! pread(2) per record: the portable baseline backend.

use bytes::Bytes;

use super::{ReadBackend, ReadRequest};
use crate::options::BackendKind;

pub struct PreadBackend;

impl ReadBackend for PreadBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Pread
    }

    fn read_ranges(&self, reqs: &mut [ReadRequest<'_>]) {
        for r in reqs {
            let mut buf = vec![0u8; r.len];
            r.result = r.segment.read_at(&mut buf, r.offset).map(|n| {
                buf.truncate(n);
                Bytes::from(buf)
            });
        }
    }
}
