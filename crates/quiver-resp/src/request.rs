//! Requests: a command as a RESP array of bulk strings, `*<n>\r\n` then `$<len>\r\n<bytes>\r\n`
//! per argument — the only request form that carries arbitrary bytes.

use bytes::BytesMut;

use crate::int::{header_len, Header};

/// A growable byte buffer RESP is appended to: `Vec<u8>` (the load generator) or `BytesMut`
/// (the server and the client).
pub trait Buffer {
    /// Makes room for at least `additional` more bytes.
    fn reserve(&mut self, additional: usize);
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);
}

impl Buffer for Vec<u8> {
    #[inline]
    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl Buffer for BytesMut {
    #[inline]
    fn reserve(&mut self, additional: usize) {
        BytesMut::reserve(self, additional);
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Appends `<ty><n>\r\n` (`*3\r\n`, `$5\r\n`).
#[inline]
pub fn put_header<B: Buffer + ?Sized>(out: &mut B, ty: u8, n: usize) {
    out.put(Header::new(ty, n).as_bytes());
}

/// Appends one bulk string: `$<len>\r\n<bytes>\r\n`.
#[inline]
pub fn put_bulk<B: Buffer + ?Sized>(out: &mut B, bytes: &[u8]) {
    put_header(out, b'$', bytes.len());
    out.put(bytes);
    out.put(b"\r\n");
}

/// Appends one request: `*<n>\r\n` then a bulk string per argument. One reservation per
/// request.
pub fn encode_command<B: Buffer + ?Sized>(out: &mut B, args: &[&[u8]]) {
    out.reserve(command_len(args));
    put_header(out, b'*', args.len());
    for arg in args {
        put_bulk(out, arg);
    }
}

/// Bytes [`encode_command`] appends for `args`.
pub fn command_len(args: &[&[u8]]) -> usize {
    header_len(args.len())
        + args
            .iter()
            .map(|a| header_len(a.len()) + a.len() + 2)
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_encode_byte_for_byte() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"GET", b"k"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        out.clear();
        encode_command(&mut out, &[b"SET", b"", b"0123456789"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$10\r\n0123456789\r\n");
        out.clear();
        put_header(&mut out, b'*', 0);
        put_header(&mut out, b'$', usize::MAX);
        assert_eq!(out, b"*0\r\n$18446744073709551615\r\n");
    }

    #[test]
    fn commands_encode_as_multibulks_into_bytes_mut() {
        let mut out = BytesMut::new();
        encode_command(&mut out, &[b"SET", b"key", b"value"]);
        assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
        out.clear();
        encode_command(&mut out, &[b"SET", b"a\r\n\0", b""]);
        assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$4\r\na\r\n\0\r\n$0\r\n\r\n");
        out.clear();
        encode_command(&mut out, &[]);
        assert_eq!(&out[..], b"*0\r\n");
        // Commands append; lengths with many digits.
        out.clear();
        let big = vec![b'z'; 1_234_567];
        encode_command(&mut out, &[b"PING"]);
        encode_command(&mut out, &[&big]);
        assert!(out.starts_with(b"*1\r\n$4\r\nPING\r\n*1\r\n$1234567\r\nzzz"));
        assert_eq!(out.len(), 14 + 4 + 10 + big.len() + 2);
    }

    #[test]
    fn command_len_is_exact() {
        let big = vec![b'x'; 100_000];
        let cases: [&[&[u8]]; 5] = [
            &[],
            &[b""],
            &[b"PING"],
            &[b"MSET", b"k", b"0123456789", b"key2", &big],
            &[&b"a"[..]; 12],
        ];
        for args in cases {
            let mut out = Vec::new();
            encode_command(&mut out, args);
            assert_eq!(command_len(args), out.len());
            let mut via_bulks = Vec::new();
            put_header(&mut via_bulks, b'*', args.len());
            for a in args {
                put_bulk(&mut via_bulks, a);
            }
            assert_eq!(via_bulks, out);
        }
    }
}
