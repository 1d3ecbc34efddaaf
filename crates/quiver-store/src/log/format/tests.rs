//! The record and segment formats' own tests: round trips, the worked examples of
//! docs/log_format.md, shape rules and damage.

use super::*;

#[test]
fn record_round_trip_and_padding() {
    let mut buf = Vec::new();
    encode_record(
        &mut buf,
        RecordType::Put,
        7,
        RecordExt::NONE,
        b"key",
        b"value",
    );
    assert_eq!(buf.len(), 32); // 24 + 3 + 5, already aligned
    assert_eq!(buf.len() % RECORD_ALIGN, 0);
    let v = decode_record(&buf, true).unwrap();
    assert_eq!(&buf[v.key.clone()], b"key");
    assert_eq!(&buf[v.value.clone()], b"value");
    assert_eq!(v.header.seq, 7);
    assert_eq!(v.header.ty, RecordType::Put);
}

/// The worked example of docs/log_format.md, byte for byte.
#[test]
fn worked_example() {
    let mut buf = Vec::new();
    encode_record(
        &mut buf,
        RecordType::Put,
        7,
        RecordExt::NONE,
        b"key",
        b"value",
    );
    let hex: Vec<String> = buf.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex.join(" "),
        "5b 6b f2 60 63 03 e0 e1 07 00 00 00 00 00 00 00 01 00 03 00 05 00 00 00 \
         6b 65 79 76 61 6c 75 65"
    );
}

/// The BatchEnd of the batch worked example of docs/log_format.md, byte for byte.
#[test]
fn worked_example_batch_end() {
    let mut buf = Vec::new();
    encode_end(&mut buf, 9, 1);
    let hex: Vec<String> = buf.iter().map(|b| format!("{b:02x}")).collect();
    let doc = include_str!("../../../../../docs/log_format.md");
    assert!(doc.contains(&hex.join(" ")), "{}", hex.join(" "));
    let h = parse_header(&buf).unwrap();
    assert_eq!(
        (h.ty, h.seq, h.key_len, h.value_len),
        (RecordType::BatchEnd, 9, 0, 4)
    );
    assert_eq!(commit_count(&buf[h.value_range()]), 1);
    assert_eq!(buf.len(), COMMIT_RECORD_LEN);
}

/// The second worked example of docs/log_format.md: a put with an expiry time.
#[test]
fn worked_example_with_expiry() {
    let mut buf = Vec::new();
    let ext = RecordExt {
        expire_at: Some(1_700_000_000_000),
        ..RecordExt::NONE
    };
    encode_record(&mut buf, RecordType::Put, 8, ext, b"key", b"value");
    let hex: Vec<String> = buf.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex.join(" "),
        "a3 6d 50 69 63 03 e0 e1 08 00 00 00 00 00 00 00 01 01 03 00 05 00 00 00 \
         00 68 e5 cf 8b 01 00 00 6b 65 79 76 61 6c 75 65"
    );
}

#[test]
fn ext_fields_round_trip_and_shape_rules() {
    for ext in [
        RecordExt::NONE,
        RecordExt {
            expire_at: Some(5),
            ..RecordExt::NONE
        },
        RecordExt {
            namespace: 3,
            ..RecordExt::NONE
        },
        RecordExt {
            kind: ValueKind::Hash,
            ..RecordExt::NONE
        },
        RecordExt {
            expire_at: Some(u64::MAX),
            namespace: u32::MAX,
            kind: ValueKind::Hash,
        },
    ] {
        let mut buf = Vec::new();
        encode_record(&mut buf, RecordType::Put, 1, ext, b"k", b"val");
        assert_eq!(buf.len() % RECORD_ALIGN, 0);
        let v = decode_record(&buf, true).unwrap();
        assert_eq!(v.ext, ext);
        assert_eq!(&buf[v.key.clone()], b"k");
        assert_eq!(&buf[v.value.clone()], b"val");
        assert_eq!(v.header.record_len(), buf.len());
    }
    // An unknown flag, an expiry or a kind on a delete, a zero namespace field: not
    // records.
    let mut buf = Vec::new();
    encode_record(&mut buf, RecordType::Put, 1, RecordExt::NONE, b"k", b"v");
    buf[17] = 0x08;
    assert!(parse_header(&buf).is_none());
    let mut del = Vec::new();
    encode_record(&mut del, RecordType::Delete, 1, RecordExt::NONE, b"k", b"");
    for flag in [FLAG_EXPIRES, FLAG_HASH] {
        del[17] = flag;
        assert!(parse_header(&del).is_none());
    }
    let mut ns = Vec::new();
    let ext = RecordExt {
        namespace: 1,
        ..RecordExt::NONE
    };
    encode_record(&mut ns, RecordType::Put, 1, ext, b"k", b"v");
    ns[RECORD_HEADER_LEN..RECORD_HEADER_LEN + 4].fill(0);
    let crc = crate::crc::crc32c(&ns[4..RECORD_HEADER_LEN + 5]);
    ns[0..4].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(check_header(&ns), Err("record namespace field holds 0"));
}

#[test]
fn damaged_value_is_detected_but_header_survives() {
    let mut buf = Vec::new();
    encode_record(
        &mut buf,
        RecordType::Put,
        1,
        RecordExt::NONE,
        b"k",
        b"hello",
    );
    buf[RECORD_HEADER_LEN + 2] ^= 1;
    assert!(check_header(&buf).is_ok());
    assert!(decode_record(&buf, true).is_err());
    buf[RECORD_HEADER_LEN] ^= 1;
    assert!(check_header(&buf).is_err());
}

#[test]
fn retype_keeps_record_valid() {
    let mut buf = Vec::new();
    encode_record(
        &mut buf,
        RecordType::BatchPut,
        9,
        RecordExt::NONE,
        b"key",
        b"v",
    );
    retype_record(&mut buf, RecordType::Put);
    let v = decode_record(&buf, true).unwrap();
    assert_eq!(v.header.ty, RecordType::Put);
}

#[test]
fn manifest_round_trip_and_damage() {
    let m = CompactionManifest {
        inputs: vec![3, 4],
        outputs: vec![0x1_0000_0009],
    };
    let text = m.encode();
    assert_eq!(
        text,
        "quiver-compaction v1\ninputs 0000000000000003,0000000000000004\noutputs 0000000100000009\n"
    );
    assert_eq!(CompactionManifest::decode(&text).unwrap(), m);
    let none = CompactionManifest::default();
    assert_eq!(CompactionManifest::decode(&none.encode()).unwrap(), none);
    for bad in [
        "",
        "quiver-compaction v1\ninputs 3\n",
        "quiver-compaction v1\ninputs 3x\noutputs \n",
        "quiver-compaction v2\ninputs \noutputs \n",
    ] {
        assert!(CompactionManifest::decode(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn manifest_is_exactly_what_encode_writes() {
    for bad in [
        "quiver-compaction v1\ninputs 3\noutputs \n",
        "quiver-compaction v1\ninputs 0000000000000003\noutputs ",
        "quiver-compaction v1\r\ninputs \r\noutputs \r\n",
        "quiver-compaction v1\ninputs +000000000000003\noutputs \n",
    ] {
        assert!(CompactionManifest::decode(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn segment_header_round_trip() {
    let h = SegmentHeader {
        version: FORMAT_VERSION,
        partition: 3,
        slot: 5,
        file_id: 99,
        order: SegmentOrder { major: 4, minor: 2 },
        segment_bytes: 1 << 20,
    };
    let b = h.encode();
    assert_eq!(SegmentHeader::decode(&b).unwrap(), h);
    let mut bad = b;
    bad[30] ^= 1;
    assert!(SegmentHeader::decode(&bad).is_err());
}
